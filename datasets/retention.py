"""How long an agency's uploaded datasets are kept: ``dataset_retention_days`` after their upload
(empty, the default: until staff delete them); core/retention.py does the deleting, in batches.

A CRM query holds no rows (it reads the CRM when a tool runs it), so it is not the agency data
this limits and is kept. Table results and charts are artefacts of a run and go with it, by
their foreign key, when the run is past ``execution_retention_days`` (agents/retention.py).
"""

from __future__ import annotations

import datetime

from celery import shared_task
from django.db.models import QuerySet

from core.retention import Policy, purge_all_agencies
from datasets.models import Dataset, DatasetSource


def _uploads_past(before: datetime.datetime) -> QuerySet[Dataset]:
    return Dataset.objects.filter(source=DatasetSource.UPLOAD, created_at__lt=before)


UPLOADS = Policy("datasets", "dataset_retention_days", _uploads_past)


@shared_task(name="datasets.purge_past_retention", ignore_result=True)
def purge_past_retention() -> int:
    """Beat: each agency's uploaded datasets past its dataset retention."""
    return purge_all_agencies([UPLOADS])
