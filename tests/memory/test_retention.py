"""Change records quote the text of memories consolidation pruned or merged away: they follow the
agency's event retention (memory.retention), in its own context, and nothing younger goes."""

from __future__ import annotations

import pytest

from core import tenancy
from core.models import Agency
from memory import retention
from memory.models import MemoryChange
from tests.agents.factories import AgentFactory
from tests.memory.factories import MemoryChangeFactory
from tests.operations.test_retention import backdate

pytestmark = pytest.mark.django_db


def test_change_records_past_the_event_retention_are_deleted_and_younger_ones_kept() -> None:
    agent = AgentFactory.create()
    forever = AgentFactory.create()
    with tenancy.platform_context():
        Agency.objects.filter(pk=agent.agency_id).update(event_retention_days=30)
        Agency.objects.filter(pk=forever.agency_id).update(event_retention_days=None)
    with tenancy.agency_context(agent.agency_id):
        old = MemoryChangeFactory.create(agent=agent, before=[{"content": "Bob's phone"}])
        young = MemoryChangeFactory.create(agent=agent)
    with tenancy.agency_context(forever.agency_id):
        kept = MemoryChangeFactory.create(agent=forever)
    backdate(MemoryChange, old.pk, days=31)
    backdate(MemoryChange, young.pk, days=29)
    backdate(MemoryChange, kept.pk, days=400)

    assert retention.purge_past_retention() == 1

    with tenancy.platform_context():
        left = set(MemoryChange.objects.values_list("pk", flat=True))
    assert left == {young.pk, kept.pk}
