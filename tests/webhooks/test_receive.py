"""Deliveries to a webhook through the whole Django stack (middleware, tenancy, row-level
security): a signed one starts the agent's run with its body as the trigger payload; every other
one is refused with its status, leaves one trigger log row saying why, and starts nothing."""

from __future__ import annotations

import datetime
import time
import uuid
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from agents.models import Execution, TriggerOutcome, TriggerType
from agents.services import agent_activate, agent_deactivate
from core import tenancy
from core.models import Agency
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
from webhooks import signing
from webhooks.models import Webhook, WebhookDelivery
from webhooks.retention import purge_past_retention
from webhooks.selectors import webhook_agency, webhook_lookup_context
from webhooks.services import webhook_rotate, webhook_update

pytestmark = pytest.mark.django_db


def assert_refused(response: Any, hook: Hook, status: int, reason: str) -> None:
    """Refused with ``status`` in the API's error shape, logged once with ``reason``, and no
    run started."""
    body = response.json()
    assert response.status_code == status, body
    assert set(body) == {"message", "code", "extra"}, body
    log = only_log(hook.agent)
    assert (log.trigger_type, log.outcome, log.skip_reason) == (
        TriggerType.WEBHOOK,
        TriggerOutcome.SKIPPED,
        reason,
    )
    assert log.execution_id is None
    assert runs(hook.agent) == []


def test_a_signed_delivery_starts_a_run_with_the_body_as_its_trigger_payload(hook: Hook) -> None:
    payload = {"order": {"id": 1042, "status": "paid"}, "note": "Grüße"}
    response = deliver(hook, payload, delivery_id="order-1042")
    assert response.status_code == 202, response.json()
    body = response.json()
    [run] = runs(hook.agent)
    assert body == {"execution_id": str(run.id), "status": "pending", "delivery_id": "order-1042"}
    assert run.trigger_type == TriggerType.WEBHOOK
    assert run.trigger_data["payload"] == payload
    assert run.trigger_data["delivery_id"] == "order-1042"
    assert run.trigger_data["webhook"] == {"id": str(hook.webhook.id), "name": hook.webhook.name}
    log = only_log(hook.agent)
    assert (log.outcome, log.execution_id, log.trigger_type) == (
        TriggerOutcome.INVOKED,
        run.id,
        TriggerType.WEBHOOK,
    )
    assert log.payload["payload"] == payload
    with tenancy.platform_context():
        delivery = WebhookDelivery.objects.get(webhook=hook.webhook)
        assert (delivery.delivery_id, delivery.execution_id) == ("order-1042", run.id)
        assert Webhook.objects.get(pk=hook.webhook.pk).last_delivery_at is not None


def test_the_url_without_its_trailing_slash_and_a_csrf_checking_client_work(hook: Hook) -> None:
    raw = encode({"a": 1})
    response = Client(enforce_csrf_checks=True).post(
        hook.path.rstrip("/"),
        data=raw,
        content_type="application/json",
        headers=signed_headers(hook.secret, raw),
    )
    assert response.status_code == 202, response.json()


def test_a_missing_signature_is_401(hook: Hook) -> None:
    response = deliver(hook, headers={signing.SIGNATURE_HEADER: None})
    assert_refused(response, hook, 401, "bad_signature")
    assert response.json()["code"] == "bad_signature"
    assert "no X-AgentDesk-Signature header" in only_log(hook.agent).skip_detail


def test_a_signature_made_with_another_secret_is_401(hook: Hook) -> None:
    response = deliver(hook, secret="whsec_not-the-webhooks-secret")
    assert_refused(response, hook, 401, "bad_signature")


def test_a_body_changed_after_signing_is_401(hook: Hook) -> None:
    raw = encode({"amount": 10})
    headers = signed_headers(hook.secret, raw)
    response = Client().post(
        hook.path, data=encode({"amount": 10000}), content_type="application/json", headers=headers
    )
    assert_refused(response, hook, 401, "bad_signature")


def test_a_delivery_id_changed_after_signing_is_401(hook: Hook) -> None:
    """A request caught on its way, sent again under a new delivery id, must not start a second
    run: the delivery id is signed too."""
    raw = encode({"amount": 10})
    headers = signed_headers(hook.secret, raw, delivery_id="first")
    headers[signing.DELIVERY_HEADER] = "second"
    response = Client().post(hook.path, data=raw, content_type="application/json", headers=headers)
    assert_refused(response, hook, 401, "bad_signature")


@pytest.mark.parametrize("delivery_id", [None, "has.dots", "x" * 201, "spaces in it"])
def test_a_missing_or_malformed_delivery_id_is_401(hook: Hook, delivery_id: str | None) -> None:
    response = deliver(hook, headers={signing.DELIVERY_HEADER: delivery_id})
    assert_refused(response, hook, 401, "bad_signature")


@pytest.mark.parametrize("age", [310, -310, 3600])  # seconds, a margin past the 300
def test_a_timestamp_more_than_five_minutes_away_is_401(hook: Hook, age: int) -> None:
    """Signed correctly, but too old (a replay of a caught request) or too far ahead."""
    response = deliver(hook, timestamp=int(time.time()) - age)
    assert_refused(response, hook, 401, "stale_timestamp")
    assert response.json()["code"] == "stale_timestamp"


def test_a_timestamp_within_five_minutes_is_accepted(hook: Hook) -> None:
    assert deliver(hook, timestamp=int(time.time()) - 240).status_code == 202


@pytest.mark.parametrize("timestamp", [None, "", "yesterday", "1.5e9"])
def test_a_missing_or_unreadable_timestamp_is_401(hook: Hook, timestamp: str | None) -> None:
    response = deliver(hook, headers={signing.TIMESTAMP_HEADER: timestamp})
    assert_refused(response, hook, 401, "stale_timestamp")


def test_a_replayed_delivery_id_is_409_and_starts_nothing_new(hook: Hook) -> None:
    first = deliver(hook, {"n": 1}, delivery_id="evt_1")
    assert first.status_code == 202
    # The sender's retry: the same delivery id, signed again with a fresh timestamp.
    again = deliver(hook, {"n": 1}, delivery_id="evt_1")
    assert again.status_code == 409, again.json()
    assert again.json()["code"] == "replayed"
    assert again.json()["extra"] == {"execution_id": first.json()["execution_id"]}
    assert len(runs(hook.agent)) == 1
    invoked, replayed = trigger_logs(hook.agent)
    assert invoked.outcome == TriggerOutcome.INVOKED
    assert (replayed.outcome, replayed.skip_reason) == (TriggerOutcome.SKIPPED, "replayed")
    assert first.json()["execution_id"] in replayed.skip_detail
    # Another delivery id is another delivery.
    assert deliver(hook, {"n": 1}, delivery_id="evt_2").status_code == 202
    assert len(runs(hook.agent)) == 2


def test_the_same_delivery_id_on_another_webhook_is_another_delivery(hook: Hook) -> None:
    other = make_hook(hook.agent)
    assert deliver(hook, delivery_id="shared-id").status_code == 202
    assert deliver(other, delivery_id="shared-id").status_code == 202


def test_a_body_over_the_limit_is_413(hook: Hook, settings: Any) -> None:
    settings.AGENTDESK_WEBHOOK_MAX_BODY_BYTES = 1000
    response = deliver(hook, {"blob": "x" * 1000})
    assert_refused(response, hook, 413, "too_large")
    assert response.json()["code"] == "too_large"
    assert "over the limit of 1000 bytes" in only_log(hook.agent).skip_detail


def test_a_body_at_the_limit_is_accepted(hook: Hook, settings: Any) -> None:
    raw = encode({"blob": "x" * 100})
    settings.AGENTDESK_WEBHOOK_MAX_BODY_BYTES = len(raw)
    assert deliver(hook, body=raw).status_code == 202


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (b"not json", "not JSON"),
        (b'["a", "list"]', "not an object"),
        (b'"a string"', "not an object"),
        (b"", "not JSON"),
        (b'{"a": NaN}', "not JSON"),
        (b'{"text": "nul \\u0000 here"}', "NUL"),
        (b'{"a": "\xff"}', "not UTF-8"),
    ],
)
def test_a_signed_body_that_is_not_a_storable_json_object_is_400(
    hook: Hook, raw: bytes, why: str
) -> None:
    response = deliver(hook, body=raw)
    assert_refused(response, hook, 400, "bad_payload")
    assert why in response.json()["message"]
    with tenancy.platform_context():
        assert not WebhookDelivery.objects.exists()  # its id is not used up


def test_a_disabled_webhook_refuses_deliveries(hook: Hook) -> None:
    with tenancy.agency_context(hook.webhook.agency_id):
        webhook_update(webhook=hook.webhook, is_enabled=False)
    response = deliver(hook)
    assert_refused(response, hook, 403, "webhook_disabled")


def test_an_inactive_agent_is_refused_and_the_delivery_can_come_again(hook: Hook) -> None:
    with tenancy.agency_context(hook.agent.agency_id):
        agent_deactivate(agent=hook.agent, user_id=None)
    response = deliver(hook, delivery_id="evt-while-off")
    assert_refused(response, hook, 409, "agent_inactive")
    assert response.json()["code"] == "agent_inactive"
    with tenancy.agency_context(hook.agent.agency_id):
        agent_activate(agent=hook.agent, user_id=None)
    # Not used up: the sender's retry of the same delivery starts the run now.
    assert deliver(hook, delivery_id="evt-while-off").status_code == 202
    assert len(runs(hook.agent)) == 1


def test_an_agent_over_its_run_limit_is_refused_like_for_events(db: None) -> None:
    hook = make_hook(max_runs_per_hour=1)
    assert deliver(hook).status_code == 202
    response = deliver(hook)
    assert response.status_code == 409
    assert response.json()["code"] == "rate_limited"
    assert len(runs(hook.agent)) == 1
    assert [log.skip_reason for log in trigger_logs(hook.agent)] == ["", "rate_limited"]


def test_trigger_conditions_filter_on_the_delivery_body(db: None) -> None:
    hook = make_hook(trigger_conditions={"order.status": ["paid", "refunded"], "test": False})
    skipped = deliver(hook, {"order": {"status": "open"}, "test": False}, delivery_id="o-1")
    assert skipped.status_code == 200, skipped.json()
    assert skipped.json()["execution_id"] is None
    assert skipped.json()["reason"] == "conditions_not_met"
    assert runs(hook.agent) == []
    log = only_log(hook.agent)
    assert (log.skip_reason, log.payload["payload"]) == (
        "conditions_not_met",
        {"order": {"status": "open"}, "test": False},
    )
    assert "'order.status' is 'open'" in log.skip_detail
    # A JSON true is not the condition's false; a missing key does not meet it either.
    assert deliver(hook, {"order": {"status": "paid"}, "test": True}).status_code == 200
    assert deliver(hook, {"order": {"status": "paid"}}).status_code == 200
    assert runs(hook.agent) == []
    started = deliver(hook, {"order": {"status": "paid"}, "test": False})
    assert started.status_code == 202
    [run] = runs(hook.agent)
    assert run.trigger_data["payload"]["order"] == {"status": "paid"}
    # A delivery that did not meet them was answered: its id is used.
    assert deliver(hook, {"order": {"status": "paid"}, "test": False}, delivery_id="o-1").json()[
        "code"
    ] == ("replayed")


def test_an_unknown_or_malformed_webhook_id_is_404(hook: Hook) -> None:
    raw = encode({})
    for path in (f"/api/v1/webhooks/{uuid.uuid4()}/", "/api/v1/webhooks/not-an-id/"):
        response = Client().post(
            path, data=raw, content_type="application/json", headers=signed_headers("x", raw)
        )
        assert response.status_code == 404
        assert response.json()["code"] == "not_found"
    assert trigger_logs(hook.agent) == []


def test_only_post_is_allowed(hook: Hook) -> None:
    response = Client().get(hook.path)
    assert response.status_code == 405
    assert response["Allow"] == "POST"
    assert trigger_logs(hook.agent) == []


# --- rotation ----------------------------------------------------------------------------------


def _rotate(hook: Hook, grace_seconds: int) -> Hook:
    with tenancy.agency_context(hook.webhook.agency_id):
        webhook, secret = webhook_rotate(webhook=hook.webhook, grace_seconds=grace_seconds)
    return Hook(webhook, secret)


def test_after_a_rotation_the_old_secret_works_during_the_grace_period_only(hook: Hook) -> None:
    rotated = _rotate(hook, 3600)
    assert rotated.secret != hook.secret
    assert deliver(rotated).status_code == 202
    assert deliver(hook).status_code == 202  # the old secret, within the grace period
    # The grace period ends.
    with tenancy.platform_context():
        Webhook.objects.filter(pk=hook.webhook.pk).update(
            previous_secret_expires_at=rotated.webhook.rotated_at
        )
    response = deliver(hook)
    assert response.status_code == 401
    assert response.json()["code"] == "bad_signature"
    assert deliver(rotated).status_code == 202
    assert len(runs(hook.agent)) == 3


def test_a_rotation_without_grace_refuses_the_old_secret_at_once(hook: Hook) -> None:
    rotated = _rotate(hook, 0)
    assert deliver(hook).status_code == 401
    assert deliver(rotated).status_code == 202


def test_a_second_rotation_drops_the_first_secret(hook: Hook) -> None:
    second = _rotate(hook, 3600)
    third = _rotate(second, 3600)
    assert deliver(hook).status_code == 401
    assert deliver(second).status_code == 202
    assert deliver(third).status_code == 202


# --- tenancy -----------------------------------------------------------------------------------


def test_a_delivery_writes_in_its_webhooks_agency_only(hook: Hook) -> None:
    other = make_hook()
    assert deliver(hook).status_code == 202
    with tenancy.agency_context(other.webhook.agency_id):
        assert not Execution.objects.exists()
        assert not WebhookDelivery.objects.exists()
        assert list(Webhook.objects.all()) == [other.webhook]
    with tenancy.agency_context(hook.webhook.agency_id):
        assert Execution.objects.count() == 1


def test_the_lookup_context_shows_the_named_webhook_and_nothing_else(hook: Hook) -> None:
    other = make_hook()
    with webhook_lookup_context(hook.webhook.id):
        assert list(Webhook.objects.values_list("id", flat=True)) == [hook.webhook.id]
        assert not WebhookDelivery.objects.exists()
        assert not Execution.objects.exists()
    with tenancy.tenant_context():  # no tenant: nothing
        assert not Webhook.objects.exists()
        # The lookup's setting did not outlive its block.
        with webhook_lookup_context(other.webhook.id):
            pass
        assert not Webhook.objects.exists()
    assert webhook_agency(webhook_id=hook.webhook.id) == hook.webhook.agency_id
    assert webhook_agency(webhook_id=uuid.uuid4()) is None


def test_the_secret_is_stored_encrypted(hook: Hook) -> None:
    with tenancy.platform_context():
        stored = Webhook.objects.get(pk=hook.webhook.pk)
    assert hook.secret.startswith("whsec_")
    assert hook.secret not in stored.secret_encrypted
    assert stored.get_secret() == hook.secret
    assert hook.secret not in repr(stored) + str(stored)


# --- retention ---------------------------------------------------------------------------------


def test_delivery_ids_are_kept_as_long_as_the_trigger_log(hook: Hook) -> None:
    """Past the agency's trigger log retention a delivery id is deleted (beat's job); within
    it, a replay is still refused."""
    assert deliver(hook, delivery_id="old").status_code == 202
    assert deliver(hook, delivery_id="new").status_code == 202
    with tenancy.platform_context():
        days = Agency.objects.get(pk=hook.webhook.agency_id).trigger_log_retention_days
    assert days is not None  # a new agency keeps its trigger log 30 days
    with tenancy.platform_context():
        WebhookDelivery.objects.filter(delivery_id="old").update(
            created_at=timezone.now() - datetime.timedelta(days=days, minutes=1)
        )
    assert purge_past_retention() >= 1
    with tenancy.platform_context():
        kept = list(
            WebhookDelivery.objects.filter(webhook=hook.webhook).values_list(
                "delivery_id", flat=True
            )
        )
    assert kept == ["new"]
    assert deliver(hook, delivery_id="new").status_code == 409
