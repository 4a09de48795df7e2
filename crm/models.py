"""The platform data the built-in tools act on: contacts, notes, tasks, calendar, email, forms.

Seed 004 names these only through its tools (``crm_*``, ``email_*``, ``calendar_*``,
``task_create``) and their ``crm_contacts`` handler code; the fields follow those. Changes emit
events (``crm.contact.created``, ``form.submitted``, ...) through the services, not here. Rows an
agent created point at it (``agent``), so staff can tell them apart.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.db import models
from django.db.models.functions import Lower

from agents.models import Agent, Execution
from core.models import AgencyOwnedModel, Site


def _agent_fk(related_name: str = "+") -> models.ForeignKey[Agent | None, Agent | None]:
    return models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name=related_name
    )


def _site_fk() -> models.ForeignKey[Site | None, Site | None]:
    return models.ForeignKey(
        Site, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )


def _user_fk() -> models.ForeignKey[models.Model | None, models.Model | None]:
    return models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )


class ContactStatus(models.TextChoices):
    LEAD = "lead", "Lead"
    ACTIVE = "active", "Active"
    CUSTOMER = "customer", "Customer"
    INACTIVE = "inactive", "Inactive"


class ContactSource(models.TextChoices):
    MANUAL = "manual", "Manual"
    FORM = "form", "Form"
    IMPORT = "import", "Import"
    API = "api", "API"
    AI_AGENT = "ai_agent", "AI agent"


class Contact(AgencyOwnedModel):
    site = _site_fk()
    first_name = models.CharField(max_length=100, blank=True)
    last_name = models.CharField(max_length=100, blank=True)
    email = models.EmailField(max_length=254, blank=True)
    phone = models.CharField(max_length=50, blank=True)
    company = models.CharField(max_length=200, blank=True)
    job_title = models.CharField(max_length=200, blank=True)
    status = models.CharField(
        max_length=10, choices=ContactStatus.choices, default=ContactStatus.LEAD
    )
    tags = ArrayField(models.CharField(max_length=100), default=list, blank=True)
    custom_fields = models.JSONField(default=dict, blank=True)
    source = models.CharField(
        max_length=10, choices=ContactSource.choices, default=ContactSource.MANUAL
    )
    source_details = models.JSONField(default=dict, blank=True)  # e.g. {"agent_id": ...}
    owner = _user_fk()
    agent = _agent_fk()
    last_contacted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["last_name", "first_name", "email"]
        indexes = [
            models.Index(fields=["agency", "status"], name="crm_contact_status_idx"),
            GinIndex(fields=["tags"], name="crm_contact_tags_gin"),
        ]
        constraints = [
            # One contact per e-mail address and agency (crm_create_contact checks duplicates).
            models.UniqueConstraint(
                "agency",
                Lower("email"),
                condition=~models.Q(email=""),
                name="crm_contact_unique_email",
            ),
            models.CheckConstraint(
                condition=models.Q(status__in=ContactStatus.values),
                name="crm_contact_status_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(source__in=ContactSource.values),
                name="crm_contact_source_valid",
            ),
        ]

    def __str__(self) -> str:
        name = f"{self.first_name} {self.last_name}".strip()
        return name or self.email or str(self.pk)


class NoteKind(models.TextChoices):
    NOTE = "note", "Note"
    CALL = "call", "Call"
    MEETING = "meeting", "Meeting"
    EMAIL = "email", "Email"


class Note(AgencyOwnedModel):
    contact = models.ForeignKey(Contact, on_delete=models.CASCADE, related_name="notes")
    kind = models.CharField(max_length=10, choices=NoteKind.choices, default=NoteKind.NOTE)
    content = models.TextField()
    author = _user_fk()
    agent = _agent_fk()

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(kind__in=NoteKind.values), name="crm_note_kind_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind}: {self.content[:60]}"


class TaskPriority(models.TextChoices):
    LOW = "low", "Low"
    MEDIUM = "medium", "Medium"
    HIGH = "high", "High"


class TaskStatus(models.TextChoices):
    OPEN = "open", "Open"
    IN_PROGRESS = "in_progress", "In progress"
    DONE = "done", "Done"
    CANCELLED = "cancelled", "Cancelled"


class Task(AgencyOwnedModel):
    site = _site_fk()
    title = models.CharField(max_length=300)
    description = models.TextField(blank=True)
    due_at = models.DateTimeField(null=True, blank=True)
    priority = models.CharField(
        max_length=10, choices=TaskPriority.choices, default=TaskPriority.MEDIUM
    )
    status = models.CharField(max_length=12, choices=TaskStatus.choices, default=TaskStatus.OPEN)
    assignee = _user_fk()
    contact = models.ForeignKey(
        Contact, null=True, blank=True, on_delete=models.SET_NULL, related_name="tasks"
    )
    agent = _agent_fk()
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["due_at", "created_at"]
        indexes = [models.Index(fields=["agency", "status", "due_at"], name="crm_task_due_idx")]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(priority__in=TaskPriority.values),
                name="crm_task_priority_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(status__in=TaskStatus.values), name="crm_task_status_valid"
            ),
        ]

    def __str__(self) -> str:
        return self.title


class EventStatus(models.TextChoices):
    CONFIRMED = "confirmed", "Confirmed"
    TENTATIVE = "tentative", "Tentative"
    CANCELLED = "cancelled", "Cancelled"


class CalendarEvent(AgencyOwnedModel):
    site = _site_fk()
    title = models.CharField(max_length=300)
    description = models.TextField(blank=True)
    location = models.CharField(max_length=300, blank=True)
    start_at = models.DateTimeField()
    end_at = models.DateTimeField()
    attendees = ArrayField(models.CharField(max_length=254), default=list, blank=True)  # e-mails
    organizer = _user_fk()  # whose calendar (calendar_check_availability's user_id)
    contact = models.ForeignKey(
        Contact, null=True, blank=True, on_delete=models.SET_NULL, related_name="calendar_events"
    )
    status = models.CharField(
        max_length=10, choices=EventStatus.choices, default=EventStatus.CONFIRMED
    )
    agent = _agent_fk()

    class Meta:
        ordering = ["start_at"]
        indexes = [
            models.Index(fields=["agency", "start_at", "end_at"], name="crm_calendar_range_idx")
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(end_at__gt=models.F("start_at")),
                name="crm_calendarevent_ends_after_start",
            ),
            models.CheckConstraint(
                condition=models.Q(status__in=EventStatus.values),
                name="crm_calendarevent_status_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.title} @ {self.start_at:%Y-%m-%d %H:%M}"


class EmailStatus(models.TextChoices):
    DRAFT = "draft", "Draft"  # email_draft: waits for a human to send it
    QUEUED = "queued", "Queued"
    SENDING = "sending", "Sending"
    SENT = "sent", "Sent"
    FAILED = "failed", "Failed"


class EmailMessage(AgencyOwnedModel):
    """The outbox: drafts and messages to send; a sender task delivers queued ones."""

    site = _site_fk()
    from_email = models.EmailField(max_length=254, blank=True)
    to = ArrayField(models.CharField(max_length=254), default=list)
    cc = ArrayField(models.CharField(max_length=254), default=list, blank=True)
    bcc = ArrayField(models.CharField(max_length=254), default=list, blank=True)
    subject = models.CharField(max_length=500)
    body = models.TextField()
    body_html = models.TextField(blank=True)
    template_id = models.CharField(max_length=100, blank=True)
    status = models.CharField(max_length=10, choices=EmailStatus.choices, default=EmailStatus.DRAFT)
    sent_at = models.DateTimeField(null=True, blank=True)
    provider_message_id = models.CharField(max_length=300, blank=True)
    error = models.TextField(blank=True)
    contact = models.ForeignKey(
        Contact, null=True, blank=True, on_delete=models.SET_NULL, related_name="emails"
    )
    agent = _agent_fk()
    execution = models.ForeignKey(
        Execution, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["agency", "status"], name="crm_email_status_idx"),
            # email_send's "did this very call queue a message already?" lookup.
            models.Index(fields=["agency", "provider_message_id"], name="crm_email_message_id_idx"),
            # The outbox sweeper: messages still queued (their sender died before taking them).
            models.Index(
                fields=["updated_at"],
                name="crm_email_queued_idx",
                condition=models.Q(status="queued"),
            ),
            # ... and the messages still "sending" (their sender died mid-send).
            models.Index(
                fields=["updated_at"],
                name="crm_email_sending_idx",
                condition=models.Q(status="sending"),
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(status__in=EmailStatus.values),
                name="crm_emailmessage_status_valid",
            ),
            models.CheckConstraint(
                condition=~models.Q(status="sent") | models.Q(sent_at__isnull=False),
                name="crm_emailmessage_sent_has_time",
            ),
        ]

    def __str__(self) -> str:
        return self.subject


class FormSubmission(AgencyOwnedModel):
    site = _site_fk()
    form_name = models.CharField(max_length=200)
    data = models.JSONField(default=dict)
    contact = models.ForeignKey(
        Contact, null=True, blank=True, on_delete=models.SET_NULL, related_name="form_submissions"
    )
    page_url = models.URLField("page URL", max_length=1000, blank=True)
    ip_address = models.GenericIPAddressField(null=True, blank=True)
    user_agent = models.CharField(max_length=500, blank=True)
    submitted_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-submitted_at"]
        indexes = [
            models.Index(fields=["agency", "form_name", "-submitted_at"], name="crm_form_name_idx")
        ]

    def __str__(self) -> str:
        return f"{self.form_name} @ {self.submitted_at:%Y-%m-%d %H:%M}"
