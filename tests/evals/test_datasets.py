"""Datasets: versions are immutable (a change makes a new one), cases are validated before
anything is written, JSONL round-trips, and another agency's rows are out of reach (RLS)."""

from __future__ import annotations

import json
import re
import uuid

import pytest
from django.db import ProgrammingError, connection, transaction

from core import tenancy
from core.exceptions import ApplicationError
from evals.models import Dataset, DatasetVersion, TestCase
from evals.services.datasets import (
    dataset_case_add,
    dataset_case_change,
    dataset_case_remove,
    dataset_create,
    dataset_import_jsonl,
    export_jsonl,
)
from tests.agents.factories import AgentFactory
from tests.factories import AgencyFactory, SiteFactory

pytestmark = pytest.mark.django_db

CASE = {
    "name": "Follow up with Marcus",
    "input": "Follow up with Marcus Oyelaran about his demo.",
    "recorded_calls": [
        {"tool": "crm_search_contacts", "arguments": {"query": "Marcus"}, "output": {"n": 1}}
    ],
    "expectations": {"must_call": ["crm_*"], "final_status": "completed", "max_steps": 6},
}


@pytest.fixture
def dataset() -> Dataset:
    agency = AgencyFactory.create()
    agent = AgentFactory.create(agency=agency, site=SiteFactory.create(agency=agency))
    with tenancy.agency_context(agency.id):
        return dataset_create(agency_id=agency.id, name="Alex", agent=agent, user_id=None)


def _cases(version: DatasetVersion) -> list[TestCase]:
    return list(TestCase.objects.filter(version=version))


def test_a_change_to_a_case_makes_a_new_version_and_leaves_the_old_one_as_it_was(
    dataset: Dataset,
) -> None:
    with tenancy.agency_context(dataset.agency_id):
        first = dataset_case_add(dataset=dataset, case=CASE, user_id=None)  # type: ignore[arg-type]
        [case] = _cases(first)
        second = dataset_case_change(
            dataset=dataset, key=str(case.key), changes={"input": "Changed."}, user_id=None
        )
        third = dataset_case_remove(dataset=dataset, key=str(case.key), user_id=None)
        assert [first.number, second.number, third.number] == [2, 3, 4]
        assert [c.input for c in _cases(first)] == [CASE["input"]]
        [changed] = _cases(second)
        assert (changed.input, changed.key, changed.pk != case.pk) == ("Changed.", case.key, True)
        assert _cases(third) == []
        assert Dataset.objects.get(pk=dataset.pk).current_version_id == third.pk


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ({**CASE, "expectations": {"must_call": ["crm add"]}}, "expectations.must_call"),
        ({**CASE, "expectations": {"output_regex": "("}}, "output_regex"),
        ({**CASE, "expectations": {"output_schema": {"type": 5}}}, "output_schema"),
        ({**CASE, "expectations": {"final_status": "done"}}, "final_status"),
        ({**CASE, "expectations": {"max_cost": 1}}, "unknown key(s) max_cost"),
        ({**CASE, "recorded_calls": [{"arguments": {}}]}, "recorded_calls[0]"),
        ({**CASE, "name": ""}, "name"),
    ],
)
def test_a_bad_case_is_refused_naming_the_fault_and_nothing_is_written(
    dataset: Dataset, case: dict, message: str
) -> None:
    with tenancy.agency_context(dataset.agency_id):
        with pytest.raises(ApplicationError, match=re.escape(message)):
            dataset_case_add(dataset=dataset, case=case, user_id=None)  # type: ignore[arg-type]
        assert dataset.versions.count() == 1


def test_jsonl_export_imports_into_another_dataset_as_it_was(dataset: Dataset) -> None:
    with tenancy.agency_context(dataset.agency_id):
        version = dataset_case_add(dataset=dataset, case=CASE, user_id=None)  # type: ignore[arg-type]
        text = export_jsonl(version)
        other = dataset_create(agency_id=dataset.agency_id, name="Copy", user_id=None)
        imported = dataset_import_jsonl(dataset=other, text=text, user_id=None)
        assert export_jsonl(imported) == text
        # Imported again, the same keys replace the cases instead of adding them.
        again = dataset_import_jsonl(dataset=other, text=text, user_id=None)
        assert len(_cases(again)) == 1


def test_a_jsonl_file_with_one_bad_line_writes_nothing(dataset: Dataset) -> None:
    good = json.dumps(CASE)
    with tenancy.agency_context(dataset.agency_id):
        with pytest.raises(ApplicationError, match="line 2: not JSON"):
            dataset_import_jsonl(dataset=dataset, text=f"{good}\n{{oops\n", user_id=None)
        bad = json.dumps({**CASE, "expectations": {"max_steps": -1}})
        with pytest.raises(ApplicationError, match=r"line 3\.expectations\.max_steps"):
            dataset_import_jsonl(dataset=dataset, text=f"{good}\n\n{bad}\n", user_id=None)
        assert dataset.versions.count() == 1
        assert TestCase.objects.filter(version__dataset=dataset).count() == 0


def test_another_agency_cannot_read_write_or_insert_evaluation_rows(dataset: Dataset) -> None:
    other = AgencyFactory.create()
    with tenancy.agency_context(dataset.agency_id):
        dataset_case_add(dataset=dataset, case=CASE, user_id=None)  # type: ignore[arg-type]
    for table in ("evals_dataset", "evals_datasetversion", "evals_testcase"):
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT count(*) FROM {table}")  # no tenant set
            assert cursor.fetchone() == (0,)
        with tenancy.agency_context(other.id), connection.cursor() as cursor:
            cursor.execute(f"SELECT count(*) FROM {table}")
            assert cursor.fetchone() == (0,)
            cursor.execute(f"UPDATE {table} SET updated_at = now()")
            assert cursor.rowcount == 0
            cursor.execute(f"DELETE FROM {table}")
            assert cursor.rowcount == 0
    with (
        tenancy.agency_context(other.id),
        connection.cursor() as cursor,
        pytest.raises(ProgrammingError, match="row-level security"),
        transaction.atomic(),
    ):
        cursor.execute(
            "INSERT INTO evals_dataset (id, agency_id, name, description, created_at,"
            " updated_at) VALUES (%s, %s, 'smuggled', '', now(), now())",
            [str(uuid.uuid4()), str(dataset.agency_id)],
        )
