"""What a delivery costs before it is trusted: a body over the limit is never read whole (the
declared length is refused unread, an undeclared one is read one byte past the limit and no
further), and each webhook has its own delivery rate, past which it answers 429 with
Retry-After."""

from __future__ import annotations

import io
from typing import Any

import pytest

from agents.models import TriggerOutcome
from core import tenancy
from tests.webhooks.conftest import (
    Hook,
    deliver,
    encode,
    make_hook,
    only_log,
    runs,
    signed_headers,
    trigger_logs,
)
from webhooks.receive import webhook_receive

pytestmark = pytest.mark.django_db


class CountingStream:
    """A request body that records how much was asked of it."""

    def __init__(self, data: bytes) -> None:
        self.stream = io.BytesIO(data)
        self.asked: list[int] = []

    def read(self, size: int) -> bytes:
        self.asked.append(size)
        return self.stream.read(size)


def _receive(hook: Hook, raw: bytes, stream: CountingStream, content_length: str | None) -> Any:
    headers = signed_headers(hook.secret, raw)
    return webhook_receive(
        webhook_id=str(hook.webhook.id),
        headers=headers,
        content_length=content_length,
        read=stream.read,
    )


def test_a_declared_length_over_the_limit_is_refused_without_reading_the_body(
    hook: Hook, settings: Any
) -> None:
    settings.AGENTDESK_WEBHOOK_MAX_BODY_BYTES = 1024
    raw = encode({"blob": "x" * 5000})
    stream = CountingStream(raw)
    with tenancy.tenant_context():  # the request's transaction, as the middleware opens it
        result = _receive(hook, raw, stream, content_length=str(len(raw)))
    assert result.status == 413
    assert stream.asked == []
    assert only_log(hook.agent).skip_reason == "too_large"


def test_an_undeclared_length_is_read_one_byte_past_the_limit_at_most(
    hook: Hook, settings: Any
) -> None:
    settings.AGENTDESK_WEBHOOK_MAX_BODY_BYTES = 1024
    raw = encode({"blob": "x" * 5000})
    stream = CountingStream(raw)
    with tenancy.tenant_context():
        result = _receive(hook, raw, stream, content_length=None)  # chunked
    assert result.status == 413
    assert stream.asked == [1025]
    assert stream.stream.tell() == 1025
    assert runs(hook.agent) == []


def test_a_lying_declared_length_reads_no_more_than_the_limit(hook: Hook, settings: Any) -> None:
    settings.AGENTDESK_WEBHOOK_MAX_BODY_BYTES = 1024
    raw = encode({"blob": "x" * 5000})
    stream = CountingStream(raw)
    with tenancy.tenant_context():
        result = _receive(hook, raw, stream, content_length="10")
    assert result.status == 413
    assert stream.asked == [1025]


def _rate(settings: Any, rate: str) -> None:
    rest = dict(settings.REST_FRAMEWORK)
    rest["DEFAULT_THROTTLE_RATES"] = {**rest["DEFAULT_THROTTLE_RATES"], "webhook": rate}
    settings.REST_FRAMEWORK = rest  # DRF re-reads its settings on the change


def test_past_its_rate_a_webhook_answers_429_with_retry_after_and_others_go_on(
    hook: Hook, settings: Any
) -> None:
    _rate(settings, "3/min")
    other = make_hook()
    statuses = [deliver(hook).status_code for _ in range(3)]
    assert statuses == [202, 202, 202]
    throttled = deliver(hook)
    assert throttled.status_code == 429, throttled.json()
    assert throttled.json()["code"] == "throttled"
    assert 1 <= int(throttled["Retry-After"]) <= 60
    assert len(runs(hook.agent)) == 3
    logs = [log for log in trigger_logs(hook.agent) if log.outcome == TriggerOutcome.SKIPPED]
    assert [log.skip_reason for log in logs] == ["throttled"]
    assert "limit of 3/min deliveries" in logs[0].skip_detail
    # Another webhook has its own count.
    assert deliver(other).status_code == 202
    assert only_log(other.agent).outcome == TriggerOutcome.INVOKED


def test_refused_deliveries_count_against_the_rate_too(hook: Hook, settings: Any) -> None:
    """Someone who found the URL cannot flood the trigger log with bad signatures."""
    _rate(settings, "2/min")
    assert deliver(hook, secret="whsec_wrong").status_code == 401
    assert deliver(hook, secret="whsec_wrong").status_code == 401
    assert deliver(hook).status_code == 429
    assert runs(hook.agent) == []
