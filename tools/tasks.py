"""Periodic work of the tool system (run by Celery beat)."""

from __future__ import annotations

import datetime

from celery import shared_task
from django.conf import settings

from tools.builtin.communication import deliver_stranded_emails, fail_abandoned_sends
from tools.mcp.tasks import refresh_mcp_servers_task  # noqa: F401 - registers the task


@shared_task(name="tools.deliver_stranded_emails", ignore_result=True)
def deliver_stranded_emails_task() -> int:
    """The outbox sweeper: messages whose worker died between queueing and sending them go out
    now; those whose worker died while sending them are marked failed (outcome unknown).
    Returns how many were sent."""
    fail_abandoned_sends(
        older_than=datetime.timedelta(seconds=settings.AGENTDESK_OUTBOX_SENDING_TIMEOUT_SECONDS)
    )
    return deliver_stranded_emails(
        older_than=datetime.timedelta(seconds=settings.AGENTDESK_OUTBOX_RETRY_AFTER_SECONDS)
    )
