"""E-mail through the outbox and Django's mail API after commit; drafts; in-app notifications."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Callable
from typing import Any

import pytest
from channels.layers import get_channel_layer
from django.core import mail
from django.core.mail.backends.base import BaseEmailBackend
from django.utils import timezone

from agents.models import Execution
from core import realtime, tenancy
from core.models import Event
from crm.models import EmailMessage, EmailStatus
from tests.crm.factories import ContactFactory
from tests.factories import MembershipFactory
from tests.tools.builtin.conftest import call, call_error, call_raw, make_ctx
from tools.builtin.communication import (
    OUTCOME_UNKNOWN,
    deliver_stranded_emails,
    fail_abandoned_sends,
    message_id_for,
)
from tools.handlers import ToolContext, ToolResult

EMAIL = {"to": ["ada@example.com", "bob@example.com"], "subject": "Quote", "body": "Here it is."}


class RefusingBackend(BaseEmailBackend):
    """A mail backend whose server refuses every message."""

    def send_messages(self, email_messages: Any) -> int:
        raise ConnectionRefusedError("mail server refused the connection")


def _row(ctx: ToolContext, email_id: str) -> EmailMessage:
    with tenancy.agency_context(ctx.agency_id):
        return EmailMessage.objects.get(id=email_id)


def _send(ctx: ToolContext, args: dict[str, Any] = EMAIL) -> ToolResult:
    result = call_raw(ctx, "email_send", args)
    assert isinstance(result, ToolResult)
    return result


def _run(callbacks: list[Callable[[], None]]) -> None:
    for callback in callbacks:
        callback()


def test_email_send_queues_then_sends_after_commit_and_marks_the_row_sent(
    ctx: ToolContext, execution: Execution, mailoutbox: list[mail.EmailMessage]
) -> None:
    contact = ContactFactory.create(agency=execution.agency, email="Ada@example.com")

    result = _send(ctx)

    row = _row(ctx, result.output["email_id"])
    assert row.status == EmailStatus.QUEUED
    assert (row.execution_id, row.agent_id, row.contact_id) == (
        execution.id,
        ctx.agent_id,
        contact.id,
    )
    assert mailoutbox == []  # nothing leaves before the tool call's transaction commits

    _run(result.after_commit)

    [sent] = mailoutbox
    assert sent.to == EMAIL["to"]
    assert (sent.subject, sent.body) == ("Quote", "Here it is.")
    assert sent.message()["Message-ID"] == message_id_for(ctx.idempotency_key)
    row = _row(ctx, result.output["email_id"])
    assert row.status == EmailStatus.SENT
    assert row.sent_at is not None
    assert row.provider_message_id == message_id_for(ctx.idempotency_key)


def test_email_send_callback_run_twice_sends_once(
    ctx: ToolContext, mailoutbox: list[mail.EmailMessage]
) -> None:
    result = _send(ctx)

    _run(result.after_commit)
    _run(result.after_commit)

    assert len(mailoutbox) == 1


def test_email_send_replayed_call_reuses_its_outbox_row(
    ctx: ToolContext, mailoutbox: list[mail.EmailMessage]
) -> None:
    first = _send(ctx)
    _run(first.after_commit)

    again = _send(ctx)  # same execution and tool call id: same idempotency key
    _run(again.after_commit)

    assert again.output["email_id"] == first.output["email_id"]
    assert again.output["already_sent"] is True
    assert len(mailoutbox) == 1
    with tenancy.agency_context(ctx.agency_id):
        assert EmailMessage.objects.filter(agency_id=ctx.agency_id).count() == 1


def test_message_ids_differ_per_tool_call(execution: Execution) -> None:
    first = message_id_for(make_ctx(execution, "call_1").idempotency_key)
    second = message_id_for(make_ctx(execution, "toolu_01 weird/id").idempotency_key)

    assert first != second
    assert first.startswith(f"<{execution.id}.call_1@")
    assert " " not in second


def test_email_send_failure_marks_the_row_failed(
    ctx: ToolContext, settings: Any, mailoutbox: list[mail.EmailMessage]
) -> None:
    settings.MAILERS = {"default": {"BACKEND": f"{__name__}.RefusingBackend"}}
    result = _send(ctx)

    _run(result.after_commit)

    row = _row(ctx, result.output["email_id"])
    assert row.status == EmailStatus.FAILED
    assert "refused" in row.error
    assert mailoutbox == []


def test_email_send_rejects_bad_addresses(ctx: ToolContext) -> None:
    error = call_error(ctx, "email_send", {**EMAIL, "to": ["not an address"]}, validate=False)

    assert error.code == "invalid_argument"


def test_email_draft_is_stored_as_draft_and_not_sent(
    ctx: ToolContext, mailoutbox: list[mail.EmailMessage]
) -> None:
    output = call(ctx, "email_draft", EMAIL)

    assert _row(ctx, output["email_id"]).status == EmailStatus.DRAFT
    assert output["status"] == "draft"
    assert mailoutbox == []


@pytest.mark.parametrize("addressed", [True, False], ids=["to_a_member", "to_the_agency"])
def test_notify_user_records_an_event_and_broadcasts_to_its_audience_after_commit(
    addressed: bool,
    ctx: ToolContext,
    execution: Execution,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """A notification for one member goes to that member's group only, not to every dashboard
    of the agency; one for nobody in particular goes to the agency's."""
    member = MembershipFactory.create(agency=execution.agency)
    args = {"message": "Quote sent", **({"user_id": member.user.email} if addressed else {})}
    with django_capture_on_commit_callbacks() as callbacks:
        output = call(ctx, "notify_user", args)
    # Run only the broadcast: the event's dispatch would enqueue a Celery task.
    broadcasts = [c for c in callbacks if "broadcast_on_commit" in c.__qualname__]
    assert len(broadcasts) == 1

    def publish() -> None:
        _run(broadcasts)
        realtime.flush()

    audience = realtime.user_group(ctx.agency_id, member.user_id)
    agency = realtime.agency_group(ctx.agency_id)
    intended, other = (audience, agency) if addressed else (agency, audience)

    async def receive_broadcast() -> tuple[dict[str, Any], bool]:
        layer = get_channel_layer()
        listening, bystander = await layer.new_channel(), await layer.new_channel()
        await layer.group_add(intended, listening)
        await layer.group_add(other, bystander)
        try:
            await asyncio.to_thread(publish)
            received = await asyncio.wait_for(layer.receive(listening), 3)
            # Sent in the same batch as the first, had it been sent at all.
            try:
                await asyncio.wait_for(layer.receive(bystander), 0.5)
                overheard = True
            except TimeoutError:
                overheard = False
            return received, overheard
        finally:
            await layer.group_discard(intended, listening)
            await layer.group_discard(other, bystander)

    message, overheard = asyncio.run(receive_broadcast())
    assert not overheard

    with tenancy.agency_context(ctx.agency_id):
        event = Event.objects.get(id=output["notification_id"])
    assert event.event_type == "ai.notification.created"
    assert event.payload["message"] == "Quote sent"
    assert event.payload["user_id"] == (member.user_id if addressed else None)
    assert message["type"] == "notification"
    assert (message["notification_id"], message["message"]) == (str(event.id), "Quote sent")
    assert message["level"] == "info"


@pytest.mark.parametrize(
    ("args", "code"),
    [
        ({"message": "hi", "channel": "sms"}, "unsupported_channel"),
        ({"message": "hi", "user_id": "nobody@example.com"}, "not_found"),
    ],
)
def test_notify_user_errors(ctx: ToolContext, args: dict[str, Any], code: str) -> None:
    assert call_error(ctx, "notify_user", args).code == code


def _age(ctx: ToolContext, email_id: str, *, seconds: int) -> None:
    """Make the row look ``seconds`` old (as a worker that died after queueing it leaves it)."""
    with tenancy.agency_context(ctx.agency_id):
        EmailMessage.objects.filter(id=email_id).update(
            updated_at=timezone.now() - datetime.timedelta(seconds=seconds)
        )


def test_the_sweeper_sends_messages_whose_sender_died_and_nothing_twice(
    execution: Execution, mailoutbox: list[mail.EmailMessage]
) -> None:
    ctx = make_ctx(execution, "call_stranded")
    stranded = _send(ctx).output["email_id"]  # queued, its after-commit send never ran
    _age(ctx, stranded, seconds=300)
    fresh_ctx, taken_ctx = make_ctx(execution, "call_fresh"), make_ctx(execution, "call_taken")
    fresh = _send(fresh_ctx, {**EMAIL, "subject": "Fresh"}).output["email_id"]  # sender busy
    taken = _send(taken_ctx, {**EMAIL, "subject": "Taken"}).output["email_id"]
    with tenancy.agency_context(ctx.agency_id):  # died mid-send: may or may not have gone out
        EmailMessage.objects.filter(id=taken).update(status=EmailStatus.SENDING)
    _age(ctx, taken, seconds=300)

    sent = deliver_stranded_emails(older_than=datetime.timedelta(seconds=120))
    again = deliver_stranded_emails(older_than=datetime.timedelta(seconds=120))

    assert (sent, again) == (1, 0)
    assert [m.subject for m in mailoutbox] == ["Quote"]
    assert _row(ctx, stranded).status == EmailStatus.SENT
    assert _row(ctx, fresh).status == EmailStatus.QUEUED
    assert _row(ctx, taken).status == EmailStatus.SENDING


def _taken_and_abandoned(execution: Execution, call_id: str, *, seconds: int) -> str:
    """A message its worker took (queued -> sending) and died with ``seconds`` ago."""
    ctx = make_ctx(execution, call_id)
    email_id = _send(ctx, {**EMAIL, "subject": call_id}).output["email_id"]
    with tenancy.agency_context(ctx.agency_id):
        EmailMessage.objects.filter(id=email_id).update(status=EmailStatus.SENDING)
    _age(ctx, email_id, seconds=seconds)
    return email_id


def test_a_message_left_sending_past_the_timeout_is_marked_failed_outcome_unknown(
    ctx: ToolContext, execution: Execution, mailoutbox: list[mail.EmailMessage]
) -> None:
    old = _taken_and_abandoned(execution, "call_old", seconds=1000)
    recent = _taken_and_abandoned(execution, "call_recent", seconds=60)  # may still be sending

    marked = fail_abandoned_sends(older_than=datetime.timedelta(seconds=900))
    again = fail_abandoned_sends(older_than=datetime.timedelta(seconds=900))

    assert (marked, again) == (1, 0)
    assert (_row(ctx, old).status, _row(ctx, old).error) == (EmailStatus.FAILED, OUTCOME_UNKNOWN)
    assert _row(ctx, old).sent_at is None
    assert _row(ctx, recent).status == EmailStatus.SENDING
    assert mailoutbox == []  # neither is ever sent again


def test_the_sweeper_task_fails_abandoned_sends_after_the_configured_timeout(
    ctx: ToolContext, execution: Execution, mailoutbox: list[mail.EmailMessage], settings: Any
) -> None:
    from tools.tasks import deliver_stranded_emails_task

    email_id = _taken_and_abandoned(execution, "call_abandoned", seconds=300)
    settings.AGENTDESK_OUTBOX_SENDING_TIMEOUT_SECONDS = 600
    assert deliver_stranded_emails_task() == 0
    assert _row(ctx, email_id).status == EmailStatus.SENDING
    settings.AGENTDESK_OUTBOX_SENDING_TIMEOUT_SECONDS = 200
    assert deliver_stranded_emails_task() == 0  # nothing sent...
    assert _row(ctx, email_id).status == EmailStatus.FAILED  # ...the abandoned send is closed
    assert mailoutbox == []


def test_the_sweeper_task_uses_the_configured_delay(
    ctx: ToolContext, mailoutbox: list[mail.EmailMessage], settings: Any
) -> None:
    from tools.tasks import deliver_stranded_emails_task

    email_id = _send(ctx).output["email_id"]
    _age(ctx, email_id, seconds=30)
    settings.AGENTDESK_OUTBOX_RETRY_AFTER_SECONDS = 60
    assert deliver_stranded_emails_task() == 0
    settings.AGENTDESK_OUTBOX_RETRY_AFTER_SECONDS = 10
    assert deliver_stranded_emails_task() == 1
    assert len(mailoutbox) == 1


@pytest.mark.parametrize("tool", ["email_send", "email_draft"])
@pytest.mark.parametrize(
    "subject",
    [
        "Hi\r\nBcc: x@example.com",
        "Hi\nthere",
        "Hi\x00",
        "Bell\x07",
        # Line breaks only Unicode knows: Python's mail headers split on them too.
        "Hi\x85there",
        "Hi\u2028there",
        "Hi\u2029there",
    ],
)
def test_email_tools_refuse_control_characters_in_the_subject_and_store_nothing(
    ctx: ToolContext, mailoutbox: list[mail.EmailMessage], tool: str, subject: str
) -> None:
    error = call_error(ctx, tool, {**EMAIL, "subject": subject})

    assert error.code == "invalid_argument"
    assert "'subject'" in error.message
    with tenancy.agency_context(ctx.agency_id):
        assert not EmailMessage.objects.exists()
    assert mailoutbox == []


def test_email_send_accepts_a_tab_in_the_subject(
    ctx: ToolContext, mailoutbox: list[mail.EmailMessage]
) -> None:
    result = _send(ctx, {**EMAIL, "subject": "Quote\tQ1"})
    _run(result.after_commit)

    assert _row(ctx, result.output["email_id"]).status == EmailStatus.SENT
    assert len(mailoutbox) == 1


def test_notify_user_refuses_a_deactivated_member(ctx: ToolContext, execution: Execution) -> None:
    member = MembershipFactory.create(agency=execution.agency, user__is_active=False)

    error = call_error(ctx, "notify_user", {"message": "hi", "user_id": member.user.username})

    assert error.code == "not_found"
    assert "No active member" in error.message
