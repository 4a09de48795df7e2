"""Evaluations in the admin: staff add a dataset (version 1, empty); a case edited in the admin
is saved as a new version, the shown one unchanged; another agency's dataset is a 404."""

from __future__ import annotations

import html
from collections.abc import Callable

import pytest
from django.db import transaction
from django.test import Client

from agents.services.versions import agent_version_record
from core import tenancy
from core.models import Agency, User
from evals.models import Dataset, DatasetVersion, Experiment, ExperimentResult, TestCase
from evals.services.datasets import dataset_case_add, dataset_create
from tests.admin.helpers import admin_url, change_url
from tests.agents.factories import AgentFactory

pytestmark = pytest.mark.django_db


def test_staff_add_a_dataset_and_an_edited_case_becomes_a_new_version(
    agency: Agency, staff: User, login: Callable[[User], Client]
) -> None:
    agent = AgentFactory.create(agency=agency)
    client = login(staff)
    response = client.post(
        admin_url(Dataset, "add"), {"name": "Alex", "agent": str(agent.pk), "description": ""}
    )
    assert response.status_code == 302, response.content[:2000]
    with tenancy.agency_context(agency.id):
        dataset = Dataset.objects.get(agency=agency)
        assert dataset.current_version is not None
        assert dataset.current_version.number == 1
        dataset_case_add(dataset=dataset, case={"name": "One", "input": "Hi"}, user_id=None)
        case = TestCase.objects.get(version__dataset=dataset)
    for url in (
        admin_url(Dataset, "changelist"),
        change_url(dataset),
        admin_url(TestCase, "changelist"),
        admin_url(Experiment, "changelist"),
    ):
        assert client.get(url).status_code == 200, url
    page = client.get(change_url(case))
    assert page.status_code == 200
    form = {
        "name": "One",
        "input": "Hello there",
        "trigger_type": "manual",
        "trigger_payload": "{}",
        "conversation": "[]",
        "recorded_calls": "[]",
        "expectations": '{"output_contains": ["Hello"]}',
    }
    response = client.post(change_url(case), form)
    assert response.status_code == 302, response.content[:3000]
    with tenancy.agency_context(agency.id):
        old = TestCase.objects.get(pk=case.pk)
        new = TestCase.objects.get(version=Dataset.objects.get(pk=dataset.pk).current_version)
    assert (old.input, old.expectations) == ("Hi", {})
    assert (new.input, new.expectations, new.key) == (
        "Hello there",
        {"output_contains": ["Hello"]},
        case.key,
    )


def test_another_agencys_dataset_is_a_404(
    agency: Agency, other_agency: Agency, staff: User, login: Callable[[User], Client]
) -> None:
    with tenancy.agency_context(other_agency.id):
        theirs = dataset_create(agency_id=other_agency.id, name="Theirs", user_id=None)
    assert login(staff).get(change_url(theirs)).status_code == 404


def _dataset_with_a_case(agency: Agency) -> Dataset:
    agent = AgentFactory.create(agency=agency, name="Alex")
    with tenancy.agency_context(agency.id), transaction.atomic():
        agent_version_record(agent=agent, user_id=None)
        dataset = dataset_create(agency_id=agency.id, name="Alex's cases", agent=agent)
        dataset_case_add(
            dataset=dataset,
            case={
                "name": "Follow up with Marcus",
                "input": "Follow up with Marcus.",
                "recorded_calls": [
                    {
                        "tool": "crm_search_contacts",
                        "arguments": {"query": "Marcus"},
                        "output": {"count": 1},
                        "status": "completed",
                    },
                ],
                "expectations": {"must_call": ["crm_search_contacts"], "final_status": "completed"},
                "source_execution_id": "376f53dc-0000-4000-8000-000000000001",
            },
            user_id=None,
        )
    return dataset


CASE_FORM = {
    "name": "Greets by name",
    "input": "Say hello to Priya.",
    "trigger_type": "manual",
    "trigger_payload": "{}",
    "conversation": "[]",
    "recorded_calls": "[]",
    "expectations": '{"output_contains": ["Priya"]}',
}


def test_staff_write_a_case_by_hand_into_a_dataset_and_a_bad_one_writes_nothing(
    agency: Agency, staff: User, login: Callable[[User], Client]
) -> None:
    dataset = _dataset_with_a_case(agency)
    client = login(staff)
    add = admin_url(TestCase, "add")
    page = client.get(f"{add}?dataset={dataset.pk}")
    assert page.status_code == 200
    assert f'<option value="{dataset.pk}" selected>' in page.content.decode()

    bad = {**CASE_FORM, "dataset": str(dataset.pk), "expectations": '{"must_call": "crm_*"}'}
    response = client.post(add, bad)
    assert response.status_code == 200  # the form again, the fault on its field
    errors = response.context["adminform"].form.errors
    assert "expectations" in errors, errors
    assert "tool-name patterns" in str(errors["expectations"])
    bad_json = {**CASE_FORM, "dataset": str(dataset.pk), "recorded_calls": "[{"}
    assert client.post(add, bad_json).status_code == 200
    with tenancy.agency_context(agency.id):
        assert dataset.versions.count() == 2  # created, the first case: nothing more
        assert TestCase.objects.filter(version__dataset=dataset).count() == 1

    response = client.post(add, {**CASE_FORM, "dataset": str(dataset.pk)})
    assert response.status_code == 302, response.content[:3000]
    with tenancy.agency_context(agency.id):
        dataset.refresh_from_db()
        assert dataset.current_version is not None
        assert dataset.current_version.number == 3
        cases = list(dataset.current_version.cases.order_by("position"))
    assert [c.name for c in cases] == ["Follow up with Marcus", "Greets by name"]
    assert cases[1].expectations == {"output_contains": ["Priya"]}
    assert response["Location"] == admin_url(TestCase, "changelist")
    assert change_url(cases[1]) in client.get(admin_url(TestCase, "changelist")).content.decode()


def test_rows_never_added_by_hand_have_no_add_page(
    agency: Agency, staff: User, login: Callable[[User], Client]
) -> None:
    client = login(staff)
    for model in (Experiment, DatasetVersion):
        url = f"/admin/evals/{model._meta.model_name}/add/"
        assert client.get(url, follow=True).status_code == 404
        listing = client.get(admin_url(model, "changelist")).content.decode()
        assert f"/admin/evals/{model._meta.model_name}/add/" not in listing


def test_the_dataset_page_lists_its_current_cases_and_its_versions(
    agency: Agency, staff: User, login: Callable[[User], Client]
) -> None:
    dataset = _dataset_with_a_case(agency)
    with tenancy.agency_context(agency.id):
        case = TestCase.objects.get(version__dataset=dataset)
    page = login(staff).get(change_url(dataset)).content.decode()
    assert f'href="{change_url(case)}"' in page
    assert "Follow up with Marcus" in page
    assert "Expects: calls crm_search_contacts; ends completed" in page
    assert "Version 2</a> (current): added Follow up with Marcus, 1 case," in page
    assert "Version 1</a>: created, 0 cases," in page


def test_a_test_case_page_shows_its_json_indented_and_links_the_run_it_came_from(
    agency: Agency, staff: User, login: Callable[[User], Client]
) -> None:
    dataset = _dataset_with_a_case(agency)
    with tenancy.agency_context(agency.id):
        case = TestCase.objects.get(version__dataset=dataset)
    page = html.unescape(login(staff).get(change_url(case)).content.decode())
    assert '[\n  {\n    "tool": "crm_search_contacts",\n' in page
    assert '"must_call": [\n    "crm_search_contacts"\n  ],' in page
    run = "/admin/agents/execution/376f53dc-0000-4000-8000-000000000001/change/"
    assert f'<a href="{run}"' in page


def test_an_empty_test_case_list_says_what_appears_there(
    agency: Agency, staff: User, login: Callable[[User], Client]
) -> None:
    page = login(staff).get(admin_url(TestCase, "changelist")).content.decode()
    assert "No test case yet" in page
    assert "Save one from an ended run&#x27;s page" in page or "Save one from an ended run" in page


def test_run_experiment_on_the_dataset_page_starts_it_through_the_service(
    agency: Agency, staff: User, login: Callable[[User], Client]
) -> None:
    dataset = _dataset_with_a_case(agency)
    client = login(staff)
    url = admin_url(Dataset, "run_experiment", dataset.pk)
    assert "run-experiment/" in client.get(change_url(dataset)).content.decode()
    form = client.get(url)
    assert form.status_code == 200
    assert "Current (version 1)" in form.content.decode()
    refused = client.post(url, {"agent": str(dataset.agent_id), "version": "7"})
    assert refused.status_code == 200
    assert "Select a valid choice. 7 is not one of the available choices." in (
        refused.content.decode()
    )
    response = client.post(url, {"agent": str(dataset.agent_id), "version": ""})
    assert response.status_code == 302, response.content[:3000]
    with tenancy.agency_context(agency.id):
        experiment = Experiment.objects.select_related("agent_version").get(agency=agency)
        runs = ExperimentResult.objects.filter(experiment=experiment)
        assert [r.execution is not None for r in runs] == [True]
    assert experiment.agent_version is not None
    assert experiment.agent_version.number == 1
    assert response["Location"] == change_url(experiment)
    page = client.get(change_url(experiment)).content.decode()
    assert "0 of 1 cases done" in page
    assert '<meta http-equiv="refresh" content="3">' in page
