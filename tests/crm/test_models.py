"""CRM data the tools act on: integrity rules and tenant isolation."""

from __future__ import annotations

import datetime

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from core import tenancy
from crm.models import CalendarEvent, Contact, EmailMessage, EmailStatus
from tests.crm.factories import (
    CalendarEventFactory,
    ContactFactory,
    EmailMessageFactory,
    FormSubmissionFactory,
    NoteFactory,
    TaskFactory,
)
from tests.factories import AgencyFactory

pytestmark = pytest.mark.django_db


def test_contact_email_is_unique_per_agency_ignoring_case() -> None:
    contact = ContactFactory.create(email="Lead@Example.com")
    with pytest.raises(IntegrityError, match="crm_contact_unique_email"), transaction.atomic():
        ContactFactory.create(agency=contact.agency, email="lead@example.com")
    ContactFactory.create(email="lead@example.com")  # another agency
    # Contacts without an e-mail address do not collide.
    ContactFactory.create(agency=contact.agency, email="")
    ContactFactory.create(agency=contact.agency, email="")


def test_calendar_event_must_end_after_it_starts() -> None:
    event = CalendarEventFactory.create()
    with tenancy.agency_context(event.agency_id):
        with pytest.raises(IntegrityError, match="ends_after_start"), transaction.atomic():
            CalendarEvent.objects.filter(pk=event.pk).update(end_at=event.start_at)
        CalendarEvent.objects.filter(pk=event.pk).update(
            end_at=event.start_at + datetime.timedelta(hours=2)
        )


def test_a_sent_email_has_a_sent_time() -> None:
    email = EmailMessageFactory.create()
    with tenancy.agency_context(email.agency_id):
        rows = EmailMessage.objects.filter(pk=email.pk)
        with pytest.raises(IntegrityError, match="sent_has_time"), transaction.atomic():
            rows.update(status=EmailStatus.SENT)
        rows.update(status=EmailStatus.SENT, sent_at=timezone.now(), provider_message_id="m-1")


def test_crm_factories_keep_children_in_their_contacts_agency() -> None:
    note = NoteFactory.create()
    task = TaskFactory.create()
    email = EmailMessageFactory.create()
    form = FormSubmissionFactory.create()
    assert task.contact is not None
    assert task.site is not None
    assert email.contact is not None
    assert form.site is not None
    assert note.agency_id == note.contact.agency_id
    assert task.agency_id == task.contact.agency_id == task.site.agency_id
    assert email.to == [email.contact.email]
    assert form.site.agency_id == form.agency_id


def test_contacts_are_invisible_to_other_agencies() -> None:
    contact = ContactFactory.create()
    other = AgencyFactory.create()
    with tenancy.agency_context(other.id):
        assert not Contact.objects.filter(pk=contact.pk).exists()
    with tenancy.agency_context(contact.agency_id):
        assert Contact.objects.get(pk=contact.pk).email == contact.email
