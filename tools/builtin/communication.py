"""Communication tools: e-mail through the outbox, and in-app notifications.

``email_send`` writes the outbox row in the executor's transaction and hands the message to
Django's mail API only after that transaction commits (``ToolResult.after_commit``): a rolled
back tool call sends nothing, and the provider never sees a message the database does not know.
The Message-ID is derived from the call's idempotency key, so a resend of the same call is
recognisable, and the row's status guards against sending it twice from this process.
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import logging
import re
import uuid
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core import mail
from django.utils import timezone

from core import tenancy
from core.realtime import agency_group, broadcast_on_commit, user_group
from crm.models import Contact, EmailMessage, EmailStatus
from tools.builtin import _args
from tools.handlers import ToolContext, ToolError, ToolResult
from tools.registry import handler

logger = logging.getLogger(__name__)

MAX_RECIPIENTS = 50
BODY_MAX_CHARS = 100_000
MESSAGE_MAX_CHARS = 2_000
NOTIFICATION_LEVELS = ("info", "success", "warning", "error")
_MSGID_LOCAL = re.compile(r"^[A-Za-z0-9!#$%&'*+/=?^_`{|}~.-]{1,200}$")  # RFC 5322 dot-atom text
# Control characters a Subject header cannot carry (tab folds harmlessly), and every other line
# break Python's str.splitlines() knows (NEL, the Unicode line and paragraph separators). CR/LF
# would inject headers: Django's mail API refuses all of them, but only at delivery, after the
# model was told "queued".
_HEADER_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f\x85\u2028\u2029]")


def message_id_for(idempotency_key: str) -> str:
    """A stable RFC 5322 Message-ID for one tool call: the same call always gets the same id."""
    local = idempotency_key.replace(":", ".")
    if (
        not _MSGID_LOCAL.match(local)
        or ".." in local
        or local.startswith(".")
        or local.endswith(".")
    ):
        # A provider id with characters a Message-ID cannot carry: a digest stays stable.
        local = "sha256." + hashlib.sha256(idempotency_key.encode()).hexdigest()
    sender = str(settings.DEFAULT_FROM_EMAIL)
    domain = sender.rpartition("@")[2].strip(" >") or "agentdesk.localhost"
    return f"<{local}@{domain}>"


def _message(args: dict[str, Any]) -> dict[str, Any]:
    return {
        "to": _args.email_list(args.get("to"), "to", max_items=MAX_RECIPIENTS),
        "subject": _subject(args),
        "body": _args.text(args, "body", max_length=BODY_MAX_CHARS, required=True),
    }


def _subject(args: dict[str, Any]) -> str:
    subject = _args.text(args, "subject", max_length=500, required=True)
    control = _HEADER_CONTROL.search(subject)
    if control is not None:
        raise ToolError(
            _args.INVALID,
            "'subject' must be one line without control characters (line breaks included); "
            f"found {control.group()!r} at position {control.start()}.",
            field="subject",
        )
    return subject


def _contact_id(ctx: ToolContext, recipients: list[str]) -> uuid.UUID | None:
    return (
        Contact.objects.filter(agency_id=ctx.agency_id, email__iexact=recipients[0])
        .values_list("id", flat=True)
        .first()
    )


def _summary(row: EmailMessage) -> dict[str, Any]:
    return {
        "email_id": str(row.id),
        "status": row.status,
        "to": row.to,
        "subject": _args.truncate(row.subject, 200),
        "message_id": row.provider_message_id,
    }


def deliver_email(*, agency_id: uuid.UUID, email_id: uuid.UUID) -> None:
    """Send one queued outbox message through Django's mail API and record the outcome.

    Runs after the tool call committed. The row moves queued -> sending in a short locked
    transaction first, so a second delivery of the same row (a retried callback) finds it taken
    and sends nothing; the SMTP conversation happens outside any transaction.
    """
    with tenancy.agency_context(agency_id):
        row = (
            EmailMessage.objects.select_for_update()
            .filter(agency_id=agency_id, id=email_id, status=EmailStatus.QUEUED)
            .first()
        )
        if row is None:
            return
        row.status = EmailStatus.SENDING
        row.save(update_fields=["status", "updated_at"])
    message = mail.EmailMessage(
        subject=row.subject,
        body=row.body,
        from_email=row.from_email or None,
        to=row.to,
        cc=row.cc,
        bcc=row.bcc,
        headers={"Message-ID": row.provider_message_id},
    )
    try:
        message.send()  # the default mailer (MAILERS["default"] on Django 6.1+)
    except Exception as exc:  # any backend failure: the row says so, the run goes on
        logger.exception("sending outbox e-mail %s failed", email_id)
        _finish(
            agency_id, email_id, status=EmailStatus.FAILED, error=f"{type(exc).__name__}: {exc}"
        )
        return
    _finish(agency_id, email_id, status=EmailStatus.SENT, error="")


def deliver_stranded_emails(*, older_than: datetime.timedelta, limit: int = 500) -> int:
    """Send the outbox messages still ``queued`` after ``older_than``: the worker that queued one
    committed it and died before its after-commit send. Safe to repeat: :func:`deliver_email`
    takes a row queued -> sending first, and a row left ``sending`` (sent or not, nobody knows)
    is never sent again (:func:`fail_abandoned_sends` closes it). Returns how many were taken."""
    cutoff = timezone.now() - older_than
    with tenancy.platform_context():
        stranded = list(
            EmailMessage.objects.filter(status=EmailStatus.QUEUED, updated_at__lt=cutoff)
            .order_by("updated_at")
            .values_list("agency_id", "id")[:limit]
        )
    for agency_id, email_id in stranded:
        deliver_email(agency_id=agency_id, email_id=email_id)
    return len(stranded)


# What a message left ``sending`` says once its sender is known to be gone (its worker died while
# handing it to the mail server). Never resent automatically: at most once beats at least once.
OUTCOME_UNKNOWN = (
    "Delivery outcome unknown: the worker stopped while handing this message to the mail server, "
    "so it may or may not have gone out. It is not resent automatically; check the mail "
    "provider's log for its Message-ID before sending it again."
)


def fail_abandoned_sends(*, older_than: datetime.timedelta) -> int:
    """Mark ``failed`` (with :data:`OUTCOME_UNKNOWN`) the outbox messages still ``sending`` after
    ``older_than``: :func:`deliver_email` records the outcome as soon as the mail backend
    returns, so such a row lost its worker mid-send and would otherwise say "sending" forever.
    ``older_than`` must exceed the mail backend's own timeout. Returns how many were marked."""
    now = timezone.now()
    with tenancy.platform_context():
        abandoned = EmailMessage.objects.filter(
            status=EmailStatus.SENDING, updated_at__lt=now - older_than
        ).update(status=EmailStatus.FAILED, error=OUTCOME_UNKNOWN, updated_at=now)
    if abandoned:
        logger.warning("%d outbox e-mail(s) lost their sender mid-send: marked failed", abandoned)
    return abandoned


def _finish(agency_id: uuid.UUID, email_id: uuid.UUID, *, status: str, error: str) -> None:
    with tenancy.agency_context(agency_id):  # its own short transaction
        EmailMessage.objects.filter(
            agency_id=agency_id, id=email_id, status=EmailStatus.SENDING
        ).update(
            status=status,
            error=error[:2000],
            sent_at=timezone.now() if status == EmailStatus.SENT else None,
            updated_at=timezone.now(),
        )


@handler("email_send")
def email_send(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    fields = _message(args)
    template_id = _args.text(args, "template_id", max_length=100)
    message_id = message_id_for(ctx.idempotency_key)
    existing = EmailMessage.objects.filter(
        agency_id=ctx.agency_id, provider_message_id=message_id
    ).first()
    if existing is not None:  # this very call ran before: report it, never queue it twice
        after = [] if existing.status != EmailStatus.QUEUED else [_deliver(ctx, existing.id)]
        return ToolResult(output={**_summary(existing), "already_sent": True}, after_commit=after)
    row = EmailMessage.objects.create(
        agency_id=ctx.agency_id,
        site_id=ctx.site_id,
        from_email=settings.DEFAULT_FROM_EMAIL,
        template_id=template_id,
        status=EmailStatus.QUEUED,
        provider_message_id=message_id,
        contact_id=_contact_id(ctx, fields["to"]),
        agent_id=ctx.agent_id,
        execution_id=ctx.execution_id,
        **fields,
    )
    return ToolResult(output=_summary(row), after_commit=[_deliver(ctx, row.id)])


def _deliver(ctx: ToolContext, email_id: uuid.UUID) -> Callable[[], None]:
    return functools.partial(deliver_email, agency_id=ctx.agency_id, email_id=email_id)


@handler("email_draft")
def email_draft(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    fields = _message(args)
    row = EmailMessage.objects.create(
        agency_id=ctx.agency_id,
        site_id=ctx.site_id,
        from_email=settings.DEFAULT_FROM_EMAIL,
        status=EmailStatus.DRAFT,
        contact_id=_contact_id(ctx, fields["to"]),
        agent_id=ctx.agent_id,
        execution_id=ctx.execution_id,
        **fields,
    )
    return {**_summary(row), "note": "Saved as a draft for a person to review; nothing was sent."}


@handler("notify_user")
def notify_user(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    message = _args.text(args, "message", max_length=MESSAGE_MAX_CHARS, required=True)
    channel = _args.choice(args.get("channel") or "in_app", "channel", ["in_app", "email", "sms"])
    if channel != "in_app":
        # Sending e-mail or SMS from here would bypass email_send's approval rules.
        raise ToolError(
            "unsupported_channel",
            f"The '{channel}' channel is not available for notifications; use 'in_app' "
            "(or email_send to write to someone).",
        )
    level = _args.choice(args.get("level") or "info", "level", list(NOTIFICATION_LEVELS))
    user_id = None
    if args.get("user_id"):
        user_id, _ = _args.member_user(ctx, args["user_id"], "user_id")
    payload = {
        "message": message,
        "level": level,
        "user_id": user_id,
        "channel": channel,
        "execution_id": str(ctx.execution_id),
    }
    event = _args.emit(
        ctx,
        "ai.notification.created",
        payload,
        module="ai_agents",
        entity="execution",
        entity_id=ctx.execution_id,
    )
    # To the person named, not the whole agency's dashboards.
    group = user_group(ctx.agency_id, user_id) if user_id else agency_group(ctx.agency_id)
    broadcast_on_commit(
        [group],
        {
            "type": "notification",
            "notification_id": str(event.id),
            **payload,
            "agent_id": str(ctx.agent_id),
            "created_at": _args.iso(event.created_at),
        },
    )
    return {"notification_id": str(event.id), "user_id": user_id, "delivered": channel}
