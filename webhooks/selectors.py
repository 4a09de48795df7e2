"""Reads of webhooks: the agency-free lookup a delivery starts with, and by-id access."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import QuerySet

from agents.models import Agent
from core import tenancy
from core.selectors import access_object
from webhooks.models import Webhook

_SET_LOOKUP = "SELECT set_config('app.webhook_id', %s, true)"


@contextmanager
def webhook_lookup_context(
    webhook_id: uuid.UUID, *, using: str = DEFAULT_DB_ALIAS
) -> Iterator[None]:
    """The block may read the one webhook whose id is ``webhook_id``, and nothing else.

    A delivery carries no credential but its signature, which needs the webhook's secret: the
    webhook has to be found before its agency is known. No tenant is set here; the
    ``webhook_lookup`` policy on ``webhooks_webhook`` (migration 0002) shows exactly the row whose
    id equals ``app.webhook_id``. The same pattern as :func:`core.tenancy.api_key_lookup_context`;
    the setting is cleared again on exit (a savepoint's settings outlive it).
    """
    with tenancy.tenant_context(using=using):
        with connections[using].cursor() as cursor:
            cursor.execute(_SET_LOOKUP, [str(webhook_id)])
        try:
            yield
        finally:
            if not connections[using].needs_rollback:
                with connections[using].cursor() as cursor:
                    cursor.execute(_SET_LOOKUP, [""])


def webhook_agency(*, webhook_id: uuid.UUID) -> uuid.UUID | None:
    """The agency of webhook ``webhook_id``, or None when there is no such webhook. Runs
    before any tenant is known (:func:`webhook_lookup_context`)."""
    with webhook_lookup_context(webhook_id):
        agency_id: uuid.UUID | None = (
            Webhook.objects.filter(pk=webhook_id).values_list("agency_id", flat=True).first()
        )
    return agency_id


def agent_webhooks(*, agent: Agent) -> QuerySet[Webhook]:
    """The agent's webhooks. Precondition: the agent's agency context (or the platform's)."""
    return Webhook.objects.filter(agency_id=agent.agency_id, agent=agent)


def access_webhook(*, agent: Agent, id: uuid.UUID | str) -> Webhook:
    """One webhook of ``agent``; missing, another agent's and another agency's are one 404."""
    return access_object(agent_webhooks(agent=agent), agency=None, id=id)
