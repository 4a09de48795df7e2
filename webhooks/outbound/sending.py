"""One attempt of a delivery: claimed, POSTed outside any transaction, recorded; then its retry
scheduled, or the delivery succeeded or failed, and the subscription disabled after too many
failures in a row (README "Outbound webhooks").

Retries follow ``AGENTDESK_OUTBOUND_WEBHOOK_RETRY_SCHEDULE`` (seconds after each failed
attempt), each wait spread by up to a fifth either way (jitter: receivers that come back are
not hit by every sender at the same second). A retry due within :data:`ETA_LIMIT_SECONDS` is
sent to the queue with that ETA; a later one, or one whose message is lost, is sent by beat's
sweep (:func:`sweep_due`), which finds every pending delivery past its time.
"""

from __future__ import annotations

import datetime
import json
import logging
import random
import time
import uuid
from dataclasses import dataclass

from django.conf import settings
from django.db import connection
from django.utils import timezone

from core import tenancy
from core.events import event_emit
from core.sending import send_task, send_task_on_commit
from tools.net import FetchError, post
from webhooks.outbound import signing
from webhooks.outbound.listener import AUTOMATIC, DELIVER_TASK, SWEEP_THEN
from webhooks.outbound.models import Delivery, DeliveryAttempt, DeliveryStatus, Subscription
from webhooks.outbound.services import allowed_private_networks

logger = logging.getLogger(__name__)
USER_AGENT = "AgentDesk-Webhooks/1.0"
# Redis redelivers a message not acknowledged within its visibility timeout (an hour by
# default), an ETA message included: later retries are left to the sweep.
ETA_LIMIT_SECONDS = 600
JITTER = 0.2
SWEEP_BATCH = 500
# A delivery just due has its message on the way: the sweep leaves it this long.
SWEEP_GRACE = 30

_CLAIM = """
UPDATE webhooks_delivery SET
    attempts = attempts + 1,
    claimed_until = now() + make_interval(secs => %s),
    updated_at = now()
WHERE id = %s
  AND (claimed_until IS NULL OR claimed_until < now())
  AND (%s OR (status = 'pending' AND next_attempt_at <= now() + interval '1 second'))
RETURNING attempts
"""


@dataclass(frozen=True, slots=True)
class Outcome:
    status_code: int | None
    latency_ms: int
    response_body: str
    error: str

    @property
    def succeeded(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def retry_delay(failed_attempts: int) -> float | None:
    """Seconds until the retry after the ``failed_attempts``-th automatic failure, jittered;
    None when the schedule is spent."""
    schedule = settings.AGENTDESK_OUTBOUND_WEBHOOK_RETRY_SCHEDULE
    if failed_attempts > len(schedule):
        return None
    base = float(schedule[failed_attempts - 1])
    return base * random.uniform(1 - JITTER, 1 + JITTER)  # noqa: S311 - jitter, not a secret


def _claim(delivery_id: uuid.UUID, *, manual: bool) -> tuple[Delivery, int] | None:
    hold = settings.AGENTDESK_OUTBOUND_WEBHOOK_TIMEOUT_SECONDS + 30
    with connection.cursor() as cursor:
        cursor.execute(_CLAIM, [hold, delivery_id, manual])
        row = cursor.fetchone()
    if row is None:
        return None  # done, not due, claimed by another message, or deleted
    delivery = Delivery.objects.select_related("subscription").get(pk=delivery_id)
    return delivery, int(row[0])


def _post(subscription: Subscription, delivery: Delivery) -> Outcome:
    body = json.dumps(delivery.payload, separators=(",", ":")).encode()
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        **signing.headers(
            secrets=subscription.valid_secrets(),
            message_id=delivery.message_id,
            timestamp=int(time.time()),
            body=body,
        ),
    }
    started = time.monotonic()
    try:
        result = post(
            subscription.url,
            content=body,
            headers=headers,
            timeout_s=settings.AGENTDESK_OUTBOUND_WEBHOOK_TIMEOUT_SECONDS,
            max_response_bytes=settings.AGENTDESK_OUTBOUND_WEBHOOK_LOG_BYTES,
            allowed_private_networks=allowed_private_networks(),
        )
    except FetchError as exc:
        latency = round((time.monotonic() - started) * 1000)
        return Outcome(None, latency, "", exc.message)
    latency = round((time.monotonic() - started) * 1000)
    text = result.body.decode("utf-8", "replace").replace("\x00", "")
    error = "" if 200 <= result.status < 300 else f"The receiver answered HTTP {result.status}."
    return Outcome(result.status, latency, text, error)


def delivery_attempt(*, delivery_id: uuid.UUID, agency_id: uuid.UUID, manual: bool = False) -> bool:
    """Make the delivery's due attempt (``manual``: one now, whatever its state); False when
    there was none to make. Precondition: outside any transaction (the POST holds none)."""
    with tenancy.agency_context(agency_id):
        claimed = _claim(delivery_id, manual=manual)
        if claimed is None:
            return False
        delivery, number = claimed
        subscription = delivery.subscription
        if not subscription.is_active and not manual:
            _give_up(delivery, "The outbound webhook is inactive: nothing was sent.")
            return False
    outcome = _post(subscription, delivery)
    with tenancy.agency_context(agency_id):
        due = _record(delivery, subscription, number=number, manual=manual, outcome=outcome)
        if due is not None:
            _send_retry(delivery, due)
    return True


def _give_up(delivery: Delivery, error: str) -> None:
    delivery.status = DeliveryStatus.FAILED
    delivery.next_attempt_at = None
    delivery.claimed_until = None
    delivery.last_error = error
    delivery.save(
        update_fields=["status", "next_attempt_at", "claimed_until", "last_error", "updated_at"]
    )


def _record(
    delivery: Delivery, subscription: Subscription, *, number: int, manual: bool, outcome: Outcome
) -> datetime.datetime | None:
    """The attempt's row and what follows from it, in one transaction; returns when the next
    attempt is due, if one is."""
    now = timezone.now()
    DeliveryAttempt.objects.create(
        agency_id=delivery.agency_id,
        delivery=delivery,
        number=number,
        manual=manual,
        status_code=outcome.status_code,
        latency_ms=outcome.latency_ms,
        response_body=outcome.response_body,
        error=outcome.error,
        succeeded=outcome.succeeded,
    )
    delivery.last_status_code = outcome.status_code
    delivery.last_error = outcome.error
    delivery.claimed_until = None
    fields = ["last_status_code", "last_error", "claimed_until", "updated_at"]
    due: datetime.datetime | None = None
    if outcome.succeeded:
        delivery.status = DeliveryStatus.SUCCEEDED
        delivery.succeeded_at = now
        delivery.next_attempt_at = None
        delivery.save(update_fields=[*fields, "status", "succeeded_at", "next_attempt_at"])
        Subscription.objects.filter(pk=subscription.pk, consecutive_failures__gt=0).update(
            consecutive_failures=0, updated_at=now
        )
        return None
    if not manual and delivery.status == DeliveryStatus.PENDING:
        delay = retry_delay(delivery.attempt_log.filter(manual=False).count())
        if delay is None:
            delivery.status = DeliveryStatus.FAILED
            delivery.next_attempt_at = None
        else:
            due = delivery.next_attempt_at = now + datetime.timedelta(seconds=delay)
        fields += ["status", "next_attempt_at"]
    delivery.save(update_fields=fields)
    # Saved first: a disabling fails every pending delivery of the subscription, this one too.
    if _count_failure(subscription, outcome, now=now):
        return None
    return due


def _count_failure(subscription: Subscription, outcome: Outcome, *, now: datetime.datetime) -> bool:
    """One more failure in a row; True when it disabled the subscription."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE webhooks_subscription SET consecutive_failures = consecutive_failures + 1,"
            " updated_at = now() WHERE id = %s RETURNING consecutive_failures, is_active",
            [subscription.pk],
        )
        row = cursor.fetchone()
    if row is None:
        return False
    failures, active = int(row[0]), bool(row[1])
    limit = settings.AGENTDESK_OUTBOUND_WEBHOOK_DISABLE_AFTER
    if not (active and limit and failures >= limit):
        return False
    _disable(subscription, failures=failures, error=outcome.error, now=now)
    return True


def _disable(
    subscription: Subscription, *, failures: int, error: str, now: datetime.datetime
) -> None:
    """Stop sending to a receiver that keeps failing: inactive, its pending deliveries failed,
    a notice in the staff inbox (:mod:`webhooks.outbound.notices`) and ``ai.webhook.disabled``
    (which other subscriptions and agents may take)."""
    Subscription.objects.filter(pk=subscription.pk).update(
        is_active=False, disabled_at=now, updated_at=now
    )
    message = f"Not sent: the outbound webhook was disabled after {failures} failures in a row."
    Delivery.objects.filter(subscription=subscription, status=DeliveryStatus.PENDING).update(
        status=DeliveryStatus.FAILED, next_attempt_at=None, last_error=message, updated_at=now
    )
    event_emit(
        agency_id=subscription.agency_id,
        event_type="ai.webhook.disabled",
        payload={
            "subscription_id": str(subscription.pk),
            "name": subscription.name,
            "url": subscription.url,
            "consecutive_failures": failures,
            "last_error": error,
        },
        source_module="webhooks",
        source_entity_type="webhook_subscription",
        source_entity_id=str(subscription.pk),
    )
    logger.warning(
        "outbound webhook %s (%s) disabled after %d failures in a row: %s",
        subscription.pk,
        subscription.name,
        failures,
        error,
    )


def _send_retry(delivery: Delivery, due: datetime.datetime) -> None:
    if (due - timezone.now()).total_seconds() > ETA_LIMIT_SECONDS:
        return  # beat's sweep sends it when it is due
    send_task_on_commit(
        DELIVER_TASK,
        delivery.pk,
        AUTOMATIC,
        agency_id=delivery.agency_id,
        about=f"outbound webhook delivery {delivery.pk}",
        then=SWEEP_THEN,
        eta=due,
    )


def sweep_due() -> list[uuid.UUID]:
    """Beat: send every pending delivery past its time whose message is lost or was never sent
    (a retry further than :data:`ETA_LIMIT_SECONDS` ahead). A message still in flight finds its
    delivery claimed, or done, and does nothing."""
    with tenancy.platform_context():
        due = list(
            Delivery.objects.filter(
                status=DeliveryStatus.PENDING,
                next_attempt_at__lte=timezone.now() - datetime.timedelta(seconds=SWEEP_GRACE),
            )
            .order_by("next_attempt_at")
            .values_list("id", "agency_id")[:SWEEP_BATCH]
        )
    for delivery_id, agency_id in due:
        send_task(
            DELIVER_TASK,
            delivery_id,
            AUTOMATIC,
            agency_id=agency_id,
            about=f"outbound webhook delivery {delivery_id}",
            then="the next sweep sends it",
        )
    return [delivery_id for delivery_id, _ in due]
