"""Telling the agency's deciders that something waits for them: in the app (a notification on
the agency's socket, which every admin page shows) and by e-mail through Django's e-mail
backend, with a link to the item.

The e-mail goes from a Celery task after the commit: never on the run's path (a slow mail relay
must not hold a worker's step), and never for a request that rolled back.
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mass_mail
from django.urls import reverse

from core.models import Membership, Role
from core.realtime import agency_group, broadcast_on_commit
from core.sending import send_task_on_commit

if TYPE_CHECKING:
    from approvals.models import Approval, Question

logger = logging.getLogger(__name__)
NOTIFY_TASK = "approvals.notify_deciders"  # approvals.tasks.notify_deciders
DECIDER_ROLES = (Role.ADMIN, Role.APPROVER)


def item_path(kind: str, item_id: uuid.UUID | str) -> str:
    """The inbox page of an approval or a question."""
    name = "approvals_inbox:approval" if kind == "approval" else "approvals_inbox:question"
    return reverse(name, args=[item_id])


def item_url(kind: str, item_id: uuid.UUID | str) -> str:
    """The inbox page, absolute (for e-mails)."""
    return settings.AGENTDESK_BASE_URL.rstrip("/") + item_path(kind, item_id)


def approval_requested_on_commit(approval: Approval) -> None:
    _on_commit(
        "approval", approval.id, approval.agency_id, f"Approval needed: {_summary(approval)}"
    )


def question_asked_on_commit(question: Question) -> None:
    verb = "Help needed" if question.kind == "correction" else "Question"
    _on_commit("question", question.id, question.agency_id, f"{verb}: {question.question[:200]}")


def _summary(approval: Approval) -> str:
    return approval.action_description[:200]


def _on_commit(kind: str, item_id: uuid.UUID, agency_id: uuid.UUID, message: str) -> None:
    broadcast_on_commit(
        [agency_group(agency_id)],
        {
            "type": "notification",
            "level": "warning",
            "message": message,
            "kind": kind,
            "item_id": str(item_id),
            "url": item_path(kind, item_id),
        },
    )
    if not settings.AGENTDESK_NOTIFY_BY_EMAIL:
        return
    send_task_on_commit(
        NOTIFY_TASK,
        kind,
        item_id,
        agency_id=agency_id,
        about=f"{kind} {item_id}",
        then="it shows in the inbox; only the deciders' e-mail is lost",
    )


def decider_emails(agency_id: uuid.UUID | str) -> list[str]:
    """The active admins and approvers of the agency who have an e-mail address.
    Precondition: the agency's context (memberships are tenant rows)."""
    user_ids = Membership.objects.filter(agency_id=agency_id, role__in=DECIDER_ROLES).values(
        "user_id"
    )
    return sorted(
        get_user_model()
        .objects.filter(pk__in=user_ids, is_active=True)
        .exclude(email="")
        .values_list("email", flat=True)
    )


def send_decider_emails(kind: str, item: Any) -> int:
    """One e-mail to each decider; returns how many were sent. Nothing when the item was
    decided (or expired) before the task ran."""
    if item.status != "pending":
        return 0
    recipients = decider_emails(item.agency_id)
    if not recipients:
        return 0
    agent = item.agent.name
    if kind == "approval":
        subject = f"[AgentDesk] Approval needed: {_summary(item)}"
        lines = [
            f"{agent} wants to: {item.action_description}",
            f"Risk: {item.risk_level}. {item.risk_explanation}".strip(),
        ]
    else:
        subject = f"[AgentDesk] {agent} asks: {item.question[:120]}"
        lines = [f"{agent} asks: {item.question}"]
        if item.options:
            lines.append("Options: " + ", ".join(str(o) for o in item.options))
    if item.expires_at is not None:
        lines.append(f"Expires: {item.expires_at:%Y-%m-%d %H:%M} UTC")
    lines += ["", f"Decide here: {item_url(kind, item.id)}"]
    body = "\n".join(lines)
    subject = " ".join(subject.split())[:200]  # one line: a header
    messages = [(subject, body, settings.DEFAULT_FROM_EMAIL, [to]) for to in recipients]
    return send_mass_mail(messages, fail_silently=False)
