"""Tenancy: agencies (the tenant), their sites, and who belongs to which agency with what role."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.contrib.auth.models import AbstractUser
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.core.validators import RegexValidator
from django.db import models


class User(AbstractUser):
    """The login. An agency user belongs to one agency through :class:`Membership`."""


# The platform modules the built-in tools require (``Tool.requires_modules``, migration tools
# 0003: the CRM, the e-mail outbox and booking for the calendar tools). Seed 004 lists them in its
# module layer ("CRM │ Forms │ Booking │ Email │ Accounting") but never says where an agency turns
# one on; ``Agency.enabled_modules`` is that place, and a new agency starts with these.
BUILTIN_MODULES = ("booking", "crm", "email")
MODULE_NAME_REGEX = r"^[a-z][a-z0-9_]{0,49}$"


def default_enabled_modules() -> list[str]:
    return list(BUILTIN_MODULES)


class EmbeddingProvider(models.TextChoices):
    """Who embeds an agency's memories (memory/embeddings/). The OpenAI kinds take their key and
    base URL from the agency's LLM provider row of the same kind."""

    LOCAL = "local", "Local model (offline)"
    OPENAI = "openai", "OpenAI"
    OPENAI_COMPATIBLE = "openai_compatible", "OpenAI-compatible server"


class Agency(models.Model):
    """The tenant. Row-level security limits every agency-owned table to one agency at a time."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=100, unique=True)
    is_active = models.BooleanField("active", default=True)
    # A tool whose ``requires_modules`` names a module missing here is not offered to this
    # agency's agents, and a call of it is refused (tools.access).
    enabled_modules = ArrayField(
        models.CharField(
            max_length=50,
            validators=[
                RegexValidator(
                    MODULE_NAME_REGEX,
                    "A module name is lower-case letters, digits and underscores, starting with "
                    "a letter (e.g. crm).",
                )
            ],
        ),
        default=default_enabled_modules,
        blank=True,
        help_text=(
            "Platform modules this agency uses, comma-separated (built in: "
            + ", ".join(BUILTIN_MODULES)
            + "). Agents are offered a tool only if every module it requires is listed here; "
            "removing a module also refuses calls in runs already under way."
        ),
    )
    # Retention (core/retention.py): rows older than this many days are deleted by beat's
    # retention jobs; empty keeps them forever. Daily usage totals are always kept.
    execution_retention_days = models.PositiveIntegerField(
        null=True,
        blank=True,
        default=90,
        help_text="Finished runs (with their steps, tool calls, approvals and questions) older "
        "than this are deleted; runs in progress or waiting never are. Empty: keep forever.",
    )
    event_retention_days = models.PositiveIntegerField(
        null=True,
        blank=True,
        default=90,
        help_text="Processed platform events older than this are deleted. Empty: keep forever.",
    )
    trigger_log_retention_days = models.PositiveIntegerField(
        null=True,
        blank=True,
        default=30,
        help_text="Trigger log rows older than this are deleted. Empty: keep forever.",
    )
    audit_retention_days = models.PositiveIntegerField(
        null=True,
        blank=True,
        default=365,
        help_text="Audit log entries older than this are deleted (the chain stays verifiable "
        "from the last one deleted). Empty: keep forever.",
    )
    dataset_retention_days = models.PositiveIntegerField(
        null=True,
        blank=True,
        default=None,
        help_text="Uploaded analysis datasets (their rows) are deleted this many days after "
        "their upload; CRM queries hold no rows and are kept. Table results and charts go "
        "with their runs. Empty: keep datasets until staff delete them.",
    )
    # The model that embeds this agency's memories and episodes (memory.embeddings). Searches
    # compare only vectors of the current model: after a change, `manage.py reembed_memories`.
    embedding_provider = models.CharField(
        max_length=32,
        choices=EmbeddingProvider.choices,
        default=EmbeddingProvider.LOCAL,
        help_text="Who embeds memories for semantic search. OpenAI kinds use the agency's LLM "
        "provider of that kind (key, base URL). After a change, existing memories are found by "
        "their words only until `manage.py reembed_memories` has embedded them again.",
    )
    embedding_model = models.CharField(
        max_length=100,
        blank=True,
        help_text="Empty: the provider's default (local: all-MiniLM-L6-v2; OpenAI: "
        "text-embedding-3-small). A server's model must return vectors of the platform's size "
        "(AGENTDESK_EMBEDDING_DIMENSIONS).",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "agencies"
        constraints = [
            models.CheckConstraint(
                condition=models.Q(embedding_provider__in=EmbeddingProvider.values),
                name="core_agency_embedding_provider_valid",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class AgencyOwnedModel(models.Model):
    """Base for every row that belongs to an agency; its table must be under row-level security.

    Migrations add the policy with :func:`core.rls.enable_rls`; a catalog test fails for any table
    with an ``agency_id`` column that lacks ENABLE + FORCE RLS and a policy.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    agency = models.ForeignKey(Agency, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


class Site(AgencyOwnedModel):
    """A client site of an agency (the seeds' ``site_id``)."""

    name = models.CharField(max_length=200)
    domain = models.CharField(max_length=253, blank=True)
    is_active = models.BooleanField("active", default=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["agency", "name"], name="core_site_unique_name"),
            # The target of agents' and executions' (site, agency) foreign keys (agents 0007).
            models.UniqueConstraint(fields=["id", "agency"], name="core_site_id_agency"),
        ]

    def __str__(self) -> str:
        return self.name


class Role(models.TextChoices):
    ADMIN = "admin", "Admin"  # manages members, API keys and everything staff can
    STAFF = "staff", "Staff"  # configures agents and data
    APPROVER = "approver", "Approver"  # decides approvals, reads the rest
    VIEWER = "viewer", "Viewer"  # reads


class Membership(AgencyOwnedModel):
    """A user's place in one agency. The tenant of a request comes from here, never from input."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="membership"
    )
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.STAFF)

    class Meta:
        ordering = ["created_at"]  # not via related tables: their rows may be hidden by RLS
        constraints = [
            models.CheckConstraint(
                condition=models.Q(role__in=Role.values), name="core_membership_role_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} @ {self.agency} ({self.role})"

    @property
    def can_write(self) -> bool:
        return self.role in {Role.ADMIN, Role.STAFF}


class ActorType(models.TextChoices):
    USER = "user", "User"
    AGENT = "agent", "Agent"
    API = "api", "API client"
    WEBHOOK = "webhook", "Webhook"
    SYSTEM = "system", "System"


# Dotted lower-case names: "crm.contact.created", "ai.execution.completed", "form.submitted".
EVENT_TYPE_REGEX = r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$"


class Event(AgencyOwnedModel):
    """The automation events log: every platform event and every ``ai.*`` event of seed 004.

    Agents subscribe to event types (``Agent.trigger_events``); the dispatcher marks an event
    ``processed_at`` once it has been matched against them, so a crash re-dispatches it.
    """

    site = models.ForeignKey(
        Site, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    event_type = models.CharField(max_length=200, db_index=True)
    payload = models.JSONField(default=dict, blank=True)
    # Seed 004's logAutomationEvent metadata: which module and entity the event is about.
    source_module = models.CharField(max_length=100, blank=True)
    source_entity_type = models.CharField(max_length=100, blank=True)
    source_entity_id = models.CharField("source entity ID", max_length=100, blank=True)
    actor_type = models.CharField(
        max_length=16, choices=ActorType.choices, default=ActorType.SYSTEM
    )
    actor_user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    actor_id = models.CharField(max_length=100, blank=True)  # agent id, API key prefix, ...
    # A sender-chosen key (webhooks, API clients): the same key twice records one event.
    idempotency_key = models.CharField(max_length=200, blank=True)
    processed_at = models.DateTimeField(null=True, blank=True)
    # An event an agent run's action emitted (a tool, the run's own ai.* events): that run, and
    # how many agent runs in a row led to it (the run's depth + 1; 0 for people and systems).
    # The runs it starts are that run's children (seed 003's parent sessions), and a chain of
    # runs each started by the previous one's event stops at AGENTDESK_MAX_RUN_CHAIN_DEPTH.
    source_execution_id = models.UUIDField(null=True, blank=True)
    chain_depth = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(
                fields=["agency", "event_type", "-created_at"], name="core_event_type_idx"
            ),
            GinIndex(fields=["payload"], name="core_event_payload_gin"),
            # An agency's events by date, of any type: its list and the retention purge.
            models.Index(fields=["agency", "-created_at"], name="core_event_agency_date_idx"),
            # The dispatcher's queue: only unprocessed events, oldest first.
            models.Index(
                fields=["created_at"],
                name="core_event_unprocessed_idx",
                condition=models.Q(processed_at__isnull=True),
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(actor_type__in=ActorType.values),
                name="core_event_actor_type_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(event_type__regex=EVENT_TYPE_REGEX),
                name="core_event_type_format",
            ),
            models.UniqueConstraint(
                fields=["agency", "idempotency_key"],
                condition=~models.Q(idempotency_key=""),
                name="core_event_unique_idempotency_key",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.event_type} @ {self.created_at:%Y-%m-%d %H:%M:%S}"
