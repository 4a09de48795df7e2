"""Datasets' retention (issue 30, "retention like other agency data"): uploads past the agency's
``dataset_retention_days`` are deleted by beat's job on the housekeeping queue (CRM queries,
which hold no rows, and other agencies' uploads are kept); table results and charts go with their
run at ``execution_retention_days``."""

from __future__ import annotations

import datetime
import uuid

import pytest
from django.conf import settings
from django.db.models import Model
from django.utils import timezone

from agents import retention as agents_retention
from agents.models import ExecutionStatus
from config.queues import HOUSEKEEPING, ROUTES
from core import tenancy
from datasets import retention
from datasets.models import Dataset, DatasetChart, DatasetResult, DatasetSource
from tests.agents.factories import AgentFactory, ExecutionFactory
from tests.datasets.factories import (
    AnalysisDatasetFactory,
    DatasetChartFactory,
    DatasetResultFactory,
)
from tests.factories import AgencyFactory

pytestmark = pytest.mark.django_db


def _backdate(model: type[Model], pk: uuid.UUID, days: int) -> None:
    """``created_at`` is auto_now_add: only an UPDATE sets it in the past."""
    with tenancy.platform_context():
        model._default_manager.filter(pk=pk).update(
            created_at=timezone.now() - datetime.timedelta(days=days)
        )


def _names(agency_id: uuid.UUID) -> set[str]:
    with tenancy.agency_context(agency_id):
        return set(Dataset.objects.values_list("name", flat=True))


def test_uploads_past_the_agencys_dataset_retention_are_deleted_and_nothing_else() -> None:
    limited = AgencyFactory.create(dataset_retention_days=30)
    forever = AgencyFactory.create()  # the default: kept until staff delete them
    for agency in (limited, forever):
        old = AnalysisDatasetFactory.create(agency=agency, name="old_upload", data=b"PAR1")
        recent = AnalysisDatasetFactory.create(agency=agency, name="recent_upload")
        query = AnalysisDatasetFactory.create(
            agency=agency,
            name="old_query",
            source=DatasetSource.CRM_QUERY,
            query={"entity_type": "contacts", "filters": [], "fields": []},
        )
        _backdate(Dataset, old.pk, 60)
        _backdate(Dataset, recent.pk, 5)
        _backdate(Dataset, query.pk, 60)

    assert retention.purge_past_retention() == 1

    assert _names(limited.id) == {"recent_upload", "old_query"}
    assert _names(forever.id) == {"old_upload", "recent_upload", "old_query"}
    assert retention.purge_past_retention() == 0


def test_a_new_agency_keeps_its_datasets_until_staff_delete_them() -> None:
    assert AgencyFactory.create().dataset_retention_days is None


def test_table_results_and_charts_go_with_their_run_past_execution_retention() -> None:
    agency = AgencyFactory.create(execution_retention_days=30)
    agent = AgentFactory.create(agency=agency)
    old = ExecutionFactory.create(agent=agent, status=ExecutionStatus.COMPLETED)
    recent = ExecutionFactory.create(agent=agent, status=ExecutionStatus.COMPLETED)
    for execution in (old, recent):
        DatasetResultFactory.create(execution=execution)
        DatasetChartFactory.create(execution=execution)
    _backdate(type(old), old.pk, 60)

    agents_retention.purge_past_retention()

    with tenancy.agency_context(agency.id):
        assert list(DatasetResult.objects.values_list("execution_id", flat=True)) == [recent.id]
        assert list(DatasetChart.objects.values_list("execution_id", flat=True)) == [recent.id]


def test_the_purge_runs_on_the_housekeeping_queue_with_the_other_retention_jobs() -> None:
    assert ROUTES["datasets.purge_past_retention"] == HOUSEKEEPING
    schedule = {entry["task"]: entry for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert (
        schedule["datasets.purge_past_retention"]["schedule"]
        == schedule["agents.purge_past_retention"]["schedule"]
    )
