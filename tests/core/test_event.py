"""The automation events log (core.Event)."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction

from core import tenancy
from core.models import Event
from tests.core.factories import EventFactory
from tests.factories import AgencyFactory

pytestmark = pytest.mark.django_db


def test_event_types_are_dotted_lower_case_names() -> None:
    EventFactory.create(event_type="ai.execution.completed")
    for bad in ("contact created", "CRM.Contact.Created", "nodot", "crm.*"):
        with pytest.raises(IntegrityError, match="core_event_type_format"), transaction.atomic():
            EventFactory.create(event_type=bad)


def test_idempotency_key_records_one_event_per_agency() -> None:
    event = EventFactory.create(idempotency_key="webhook-123")
    with pytest.raises(IntegrityError, match="idempotency_key"), transaction.atomic():
        EventFactory.create(agency=event.agency, idempotency_key="webhook-123")
    EventFactory.create(idempotency_key="webhook-123")  # another agency
    EventFactory.create(agency=event.agency)  # no key: no limit
    EventFactory.create(agency=event.agency)


def test_events_are_isolated_and_payload_is_gin_indexed() -> None:
    event = EventFactory.create(payload={"contact_id": "c-42"})
    other = AgencyFactory.create()
    with tenancy.agency_context(other.id):
        assert not Event.objects.filter(pk=event.pk).exists()
    with tenancy.agency_context(event.agency_id):
        assert Event.objects.get(payload__contains={"contact_id": "c-42"}).pk == event.pk
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'core_event_payload_gin'")
        assert "USING gin (payload)" in cursor.fetchone()[0]
