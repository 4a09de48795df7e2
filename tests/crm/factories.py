"""CRM factories. Children take their agency (and site) from their parent row."""

from __future__ import annotations

import datetime

import factory
from django.utils import timezone

from crm.models import (
    CalendarEvent,
    Contact,
    ContactStatus,
    EmailMessage,
    EmailStatus,
    FormSubmission,
    Note,
    Task,
)
from tests.factories import AgencyFactory, SiteFactory, TenantFactory


class ContactFactory(TenantFactory[Contact]):
    class Meta:
        model = Contact

    agency = factory.SubFactory(AgencyFactory)
    site = factory.SubFactory(SiteFactory, agency=factory.SelfAttribute("..agency"))
    first_name = factory.Sequence(lambda n: f"First{n}")
    last_name = "Example"
    email = factory.Sequence(lambda n: f"contact{n}@example.com")
    status = ContactStatus.LEAD


class NoteFactory(TenantFactory[Note]):
    class Meta:
        model = Note

    contact = factory.SubFactory(ContactFactory)
    agency = factory.SelfAttribute("contact.agency")
    content = "Called, left a voicemail."


class TaskFactory(TenantFactory[Task]):
    class Meta:
        model = Task

    contact = factory.SubFactory(ContactFactory)
    agency = factory.SelfAttribute("contact.agency")
    site = factory.SelfAttribute("contact.site")
    title = factory.Sequence(lambda n: f"Follow up {n}")
    due_at = factory.LazyFunction(lambda: timezone.now() + datetime.timedelta(days=1))


class CalendarEventFactory(TenantFactory[CalendarEvent]):
    class Meta:
        model = CalendarEvent

    contact = factory.SubFactory(ContactFactory)
    agency = factory.SelfAttribute("contact.agency")
    site = factory.SelfAttribute("contact.site")
    title = "Discovery call"
    start_at = factory.LazyFunction(lambda: timezone.now() + datetime.timedelta(days=2))
    end_at = factory.LazyAttribute(lambda o: o.start_at + datetime.timedelta(minutes=30))
    attendees = factory.LazyAttribute(lambda o: [o.contact.email])


class EmailMessageFactory(TenantFactory[EmailMessage]):
    class Meta:
        model = EmailMessage

    contact = factory.SubFactory(ContactFactory)
    agency = factory.SelfAttribute("contact.agency")
    site = factory.SelfAttribute("contact.site")
    to = factory.LazyAttribute(lambda o: [o.contact.email])
    subject = "Hello"
    body = "Nice to meet you."
    status = EmailStatus.DRAFT


class FormSubmissionFactory(TenantFactory[FormSubmission]):
    class Meta:
        model = FormSubmission

    agency = factory.SubFactory(AgencyFactory)
    site = factory.SubFactory(SiteFactory, agency=factory.SelfAttribute("..agency"))
    form_name = "contact-us"
    data = factory.LazyFunction(lambda: {"email": "lead@example.com", "message": "Hi"})
