"""Core factories beyond the tenancy ones in tests/factories.py."""

from __future__ import annotations

import factory

from core.models import ActorType, Event
from tests.factories import AgencyFactory, TenantFactory


class EventFactory(TenantFactory[Event]):
    class Meta:
        model = Event

    agency = factory.SubFactory(AgencyFactory)
    event_type = "crm.contact.created"
    payload = factory.LazyFunction(lambda: {"contact_id": "c-1", "source": "form"})
    actor_type = ActorType.SYSTEM
