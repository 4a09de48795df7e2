"""What the memory app keeps, and for how long (core/retention.py does the deleting).

Change records quote the text of the memories that consolidation pruned or merged away and of
duplicates it refused: they follow the agency's event retention, so that text is not kept
forever once the memory itself is gone. Memories are kept until they are deleted, pruned or
merged (consolidation), and expired ones are never returned by a search.
"""

from __future__ import annotations

import datetime

from celery import shared_task
from django.db.models import QuerySet

from core.retention import Policy, purge_all_agencies
from memory.models import MemoryChange


def _changes_past(before: datetime.datetime) -> QuerySet[MemoryChange]:
    return MemoryChange.objects.filter(created_at__lt=before)


MEMORY_CHANGES = Policy("memory_changes", "event_retention_days", _changes_past)


@shared_task(name="memory.purge_past_retention", ignore_result=True)
def purge_past_retention() -> int:
    """Beat: each agency's memory change records past its event retention."""
    return purge_all_agencies([MEMORY_CHANGES])
