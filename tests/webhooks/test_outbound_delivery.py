"""Outbound webhooks, from the event to the receiver (the attempts made in the test's process,
against a real receiver on 127.0.0.1): which events make deliveries, the Standard Webhooks
signature checked with the specification's reference code, retries after a 500 and a timeout
until the receiver recovers, the schedule spent, the subscription disabled after failures in a
row (its notice and event), private addresses refused at send, and RLS over the new tables."""

from __future__ import annotations

import datetime
import uuid
from decimal import Decimal

import pytest
from django.db import connection
from django.test import override_settings
from django.utils import timezone
from standardwebhooks import Webhook as Verifier

from core import notices, tenancy
from core.events import emitted_by_run, event_emit
from core.models import Agency, Event
from tests.factories import AgencyFactory
from tests.webhooks.receiver import HANG, Receiver
from usage.models import Budget
from usage.services import budget_reserve, budget_settle
from webhooks.outbound.models import Delivery, DeliveryStatus, Subscription
from webhooks.outbound.sending import delivery_attempt, sweep_due
from webhooks.outbound.services import subscription_create, subscription_rotate

pytestmark = pytest.mark.django_db


def _subscribe(
    agency: Agency, url: str, *types: str, name: str = "hook"
) -> tuple[Subscription, str]:
    with tenancy.agency_context(agency.id):
        return subscription_create(
            agency_id=agency.id, name=name, url=url, event_types=list(types) or ["ai.*"]
        )


def _emit(agency: Agency, event_type: str = "ai.execution.failed", **payload: object) -> Event:
    with tenancy.agency_context(agency.id):
        return event_emit(agency_id=agency.id, event_type=event_type, payload=payload)


def _deliveries(agency: Agency, **filters: object) -> list[Delivery]:
    with tenancy.agency_context(agency.id):
        return list(
            Delivery.objects.filter(**filters)
            .order_by("created_at")
            .prefetch_related("attempt_log")
        )


def _attempt(delivery: Delivery) -> bool:
    return delivery_attempt(delivery_id=delivery.pk, agency_id=delivery.agency_id)


def _make_due(delivery: Delivery) -> None:
    with tenancy.agency_context(delivery.agency_id):
        Delivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now())


def _reload(delivery: Delivery) -> Delivery:
    [found] = _deliveries(Agency(pk=delivery.agency_id), pk=delivery.pk)
    return found


@pytest.fixture
def agency() -> Agency:
    return AgencyFactory.create()


def test_an_event_makes_one_delivery_per_active_subscription_that_takes_it(agency: Agency) -> None:
    url = "http://127.0.0.1:9/hook"
    exact, _ = _subscribe(agency, url, "ai.execution.failed", name="exact")
    pattern, _ = _subscribe(agency, url, "ai.execution.*", name="pattern")
    every, _ = _subscribe(agency, url, "*", name="every")
    _subscribe(agency, url, "ai.approval.requested", name="other type")
    inactive, _ = _subscribe(agency, url, "ai.*", name="inactive")
    with tenancy.agency_context(agency.id):
        Subscription.objects.filter(pk=inactive.pk).update(is_active=False)
    other_agency = AgencyFactory.create()
    _subscribe(other_agency, url, "*", name="elsewhere")

    event = _emit(agency, "ai.execution.failed", error="boom")

    found = _deliveries(agency)
    assert {d.subscription_id for d in found} == {exact.pk, pattern.pk, every.pk}
    assert {d.event_id for d in found} == {event.id}
    assert all(d.status == DeliveryStatus.PENDING and d.attempts == 0 for d in found)
    assert found[0].payload["type"] == "ai.execution.failed"
    assert found[0].payload["data"]["payload"] == {"error": "boom"}
    assert _deliveries(other_agency) == []


def test_a_rehearsals_events_notify_nobody(agency: Agency) -> None:
    _subscribe(agency, "http://127.0.0.1:9/hook", "*")
    with tenancy.agency_context(agency.id), emitted_by_run(uuid.uuid4(), 0, dispatch=False):
        event_emit(agency_id=agency.id, event_type="ai.execution.completed")
    assert _deliveries(agency) == []


def test_a_delivery_is_signed_as_standard_webhooks_says_and_logged(agency: Agency) -> None:
    with Receiver(200).running() as receiver:
        _, secret = _subscribe(agency, receiver.url, "ai.execution.completed")
        _emit(agency, "ai.execution.completed", output="done")
        [delivery] = _deliveries(agency)
        assert _attempt(delivery)

    [request] = receiver.received
    assert request.headers["webhook-id"] == delivery.message_id
    assert request.headers["content-type"] == "application/json"
    # The specification's reference code accepts it (and its timestamp).
    verified = Verifier(secret).verify(request.body, request.headers)
    assert verified["type"] == "ai.execution.completed"
    assert verified["data"]["payload"] == {"output": "done"}
    done = _reload(delivery)
    assert (done.status, done.attempts, done.last_status_code) == (DeliveryStatus.SUCCEEDED, 1, 200)
    [attempt] = done.attempt_log.all()
    assert (attempt.number, attempt.status_code, attempt.succeeded) == (1, 200, True)
    assert attempt.response_body == '{"ok": true}'
    assert attempt.latency_ms >= 0
    assert not _attempt(delivery)  # done: a second message for it sends nothing
    assert len(receiver.received) == 1


def test_after_a_rotation_both_secrets_sign_during_the_overlap(agency: Agency) -> None:
    with Receiver(200).running() as receiver:
        subscription, old = _subscribe(agency, receiver.url, "ai.execution.completed")
        with tenancy.agency_context(agency.id):
            _, new = subscription_rotate(subscription=subscription, overlap_seconds=3600)
        _emit(agency, "ai.execution.completed")
        [delivery] = _deliveries(agency)
        _attempt(delivery)
    [request] = receiver.received
    assert len(request.headers["webhook-signature"].split(" ")) == 2
    Verifier(old).verify(request.body, request.headers)
    Verifier(new).verify(request.body, request.headers)


@override_settings(
    AGENTDESK_OUTBOUND_WEBHOOK_TIMEOUT_SECONDS=0.5,
    AGENTDESK_OUTBOUND_WEBHOOK_RETRY_SCHEDULE=[30, 30],
)
def test_a_failing_then_hanging_receiver_is_retried_until_it_recovers(agency: Agency) -> None:
    with Receiver(500, HANG, 200).running() as receiver:
        subscription, secret = _subscribe(agency, receiver.url, "ai.execution.failed")
        _emit(agency)
        [delivery] = _deliveries(agency)
        before = timezone.now()
        assert _attempt(delivery)  # 500
        first = _reload(delivery)
        assert first.status == DeliveryStatus.PENDING
        assert first.next_attempt_at is not None
        assert first.next_attempt_at > before
        assert not _attempt(delivery)  # not due yet: nothing sent
        _make_due(delivery)
        assert _attempt(delivery)  # held past the timeout
        receiver.release()
        _make_due(delivery)
        assert _attempt(delivery)  # recovered

    done = _reload(delivery)
    assert done.status == DeliveryStatus.SUCCEEDED
    attempts = list(done.attempt_log.all())
    assert [a.status_code for a in attempts] == [500, None, 200]
    assert "HTTP 500" in attempts[0].error
    assert attempts[0].response_body == "receiver says no"
    assert "too long" in attempts[1].error
    assert len(receiver.received) == 3
    assert len({r.headers["webhook-id"] for r in receiver.received}) == 1
    for request in receiver.received:
        Verifier(secret).verify(request.body, request.headers)
    with tenancy.agency_context(agency.id):
        assert Subscription.objects.get(pk=subscription.pk).consecutive_failures == 0


@override_settings(AGENTDESK_OUTBOUND_WEBHOOK_RETRY_SCHEDULE=[1, 1])
def test_a_delivery_fails_when_its_retries_are_spent(agency: Agency) -> None:
    with Receiver(503).running() as receiver:
        _subscribe(agency, receiver.url, "ai.execution.failed")
        _emit(agency)
        [delivery] = _deliveries(agency)
        for _ in range(3):
            _make_due(delivery)
            assert _attempt(delivery)
        failed = _reload(delivery)
        assert (failed.status, failed.attempts, failed.next_attempt_at) == (
            DeliveryStatus.FAILED,
            3,
            None,
        )
        _make_due(delivery)
        assert not _attempt(delivery)  # failed: no automatic attempt any more
    assert len(receiver.received) == 3


@override_settings(AGENTDESK_OUTBOUND_WEBHOOK_DISABLE_AFTER=3)
def test_a_subscription_is_disabled_after_failures_in_a_row_with_a_notice_and_an_event(
    agency: Agency,
) -> None:
    with Receiver(500).running() as receiver:
        subscription, _ = _subscribe(agency, receiver.url, "ai.execution.failed", name="crm sync")
        watcher, _ = _subscribe(agency, "http://127.0.0.1:9/", "ai.webhook.disabled", name="ops")
        for _ in range(3):
            _emit(agency)
        for delivery in _deliveries(agency, subscription=subscription)[:2]:
            _attempt(delivery)
        with tenancy.agency_context(agency.id):
            assert Subscription.objects.get(pk=subscription.pk).is_active
        third = _deliveries(agency, subscription=subscription)[2]
        _attempt(third)

    with tenancy.agency_context(agency.id):
        disabled = Subscription.objects.get(pk=subscription.pk)
        assert not disabled.is_active
        assert disabled.disabled_at is not None
        assert disabled.consecutive_failures == 3
        [event] = Event.objects.filter(event_type="ai.webhook.disabled")
        assert event.payload["subscription_id"] == str(subscription.pk)
        assert "HTTP 500" in event.payload["last_error"]
        [titles] = [[n.title for n in notices.notices(agency.id)]]
        assert "Outbound webhook disabled: crm sync" in titles
    # Its other deliveries are failed, not sent; the watcher was told.
    remaining = _deliveries(agency, subscription=subscription)
    assert all(d.status == DeliveryStatus.FAILED for d in remaining)
    assert [d.event_type for d in _deliveries(agency, subscription=watcher)] == [
        "ai.webhook.disabled"
    ]
    # A new event goes to it no more.
    _emit(agency)
    assert len(_deliveries(agency, subscription=subscription)) == 3


def test_a_private_address_is_refused_at_send_too(agency: Agency) -> None:
    with Receiver(200).running() as receiver:
        _subscribe(agency, receiver.url, "ai.execution.failed")
        _emit(agency)
        [delivery] = _deliveries(agency)
        with override_settings(AGENTDESK_OUTBOUND_WEBHOOK_PRIVATE_NETWORKS=[]):
            assert _attempt(delivery)
    assert receiver.received == []
    [attempt] = _reload(delivery).attempt_log.all()
    assert attempt.status_code is None
    assert "loopback address" in attempt.error


def test_a_budget_crossing_a_threshold_emits_its_event_once(agency: Agency) -> None:
    _subscribe(agency, "http://127.0.0.1:9/", "ai.budget.threshold_crossed")
    with tenancy.agency_context(agency.id):
        Budget.objects.create(agency=agency, date=timezone.localdate(), limit_usd=Decimal(10))
        for cost in (Decimal(5), Decimal(3), Decimal("0.5"), Decimal("1.5")):
            fits, budget_id = budget_reserve(agency_id=agency.id, amount=cost)
            assert fits
            assert budget_id is not None
            budget_settle(budget_id=budget_id, reserved=cost, cost=cost)
        crossed = [
            e.payload["threshold_percent"]
            for e in Event.objects.filter(event_type="ai.budget.threshold_crossed").order_by(
                "created_at"
            )
        ]
    assert crossed == [80, 100]
    assert len(_deliveries(agency)) == 2


def test_another_agencys_subscriptions_and_deliveries_are_invisible_under_rls(
    agency: Agency,
) -> None:
    _subscribe(agency, "http://127.0.0.1:9/", "*")
    _emit(agency)
    other = AgencyFactory.create()
    with tenancy.agency_context(other.id):
        assert not Subscription.objects.exists()
        assert not Delivery.objects.exists()
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM webhooks_subscription")
            assert cursor.fetchone() == (0,)
            cursor.execute(
                "UPDATE webhooks_delivery SET status = 'failed' WHERE agency_id = %s", [agency.id]
            )
            assert cursor.rowcount == 0
    with tenancy.tenant_context():
        assert not Delivery.objects.exists()  # no tenant: nothing


def test_beats_sweep_sends_overdue_attempts_and_leaves_fresh_ones(agency: Agency) -> None:
    _subscribe(agency, "http://127.0.0.1:9/", "ai.execution.failed")
    _emit(agency)
    _emit(agency)
    overdue, fresh = _deliveries(agency)
    with tenancy.agency_context(agency.id):
        Delivery.objects.filter(pk=overdue.pk).update(
            next_attempt_at=timezone.now() - datetime.timedelta(minutes=5)
        )
    swept = sweep_due()
    assert overdue.pk in swept
    assert fresh.pk not in swept  # just due: its message is on the way
