"""Evaluations in the admin: staff add a dataset (version 1, empty); a case edited in the admin
is saved as a new version, the shown one unchanged; another agency's dataset is a 404."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.test import Client

from core import tenancy
from core.models import Agency, User
from evals.models import Dataset, Experiment, TestCase
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
