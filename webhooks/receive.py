"""Receiving a delivery: find the webhook, throttle, check it is enabled, the size, the timestamp
and the signature, then start the agent's run through the same path as every other trigger
(:func:`agents.services.execution_create`: run limits, the agency and site switches, the trigger
log; budgets apply in the run). Every delivery to a known webhook, refused or not, leaves one row in
the agent's trigger log (``trigger_type`` webhook) saying what happened.

Precondition of :func:`webhook_receive`: the request's transaction with no tenant (an anonymous
request under :class:`core.middleware.TenantMiddleware`); it enters the webhook's agency itself.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from agents.models import Agent, SkipReason, TriggerLog, TriggerOutcome, TriggerType
from agents.services import execution_create
from agents.triggers import InvalidConditions, unmet_condition, validate_conditions
from core import tenancy
from core.api.exceptions import error_body
from core.storable import storable_text, unstorable
from webhooks import signing
from webhooks.models import Webhook, WebhookDelivery
from webhooks.selectors import webhook_agency
from webhooks.throttling import WebhookRateThrottle

logger = logging.getLogger(__name__)
DELIVERY_INDEX = "webhooks_delivery_id_uniq"
# Refusals after which the sender may try the same delivery again: its id is not used up.
_TRANSIENT = frozenset({SkipReason.AGENT_INACTIVE, SkipReason.RATE_LIMITED})
_LAST_DELIVERY_EVERY = 60.0  # seconds: last_delivery_at is a hint for people, not a counter


@dataclass(frozen=True)
class DeliveryResult:
    """The HTTP answer to a delivery: status, JSON body and extra headers."""

    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


def _error(status: int, code: str, message: str, **extra: Any) -> DeliveryResult:
    headers = {"Retry-After": str(extra.pop("retry_after"))} if "retry_after" in extra else {}
    return DeliveryResult(status, error_body(code, message, extra), headers)


def webhook_receive(
    *,
    webhook_id: str,
    headers: Mapping[str, str],
    content_length: str | None,
    read: Callable[[int], bytes],
) -> DeliveryResult:
    """Handle one delivery to webhook ``webhook_id``; ``read(n)`` reads at most ``n`` bytes of
    the body (it is never read past the size limit)."""
    try:
        wid = uuid.UUID(webhook_id)
    except ValueError:
        wid = None
    agency_id = webhook_agency(webhook_id=wid) if wid is not None else None
    if wid is None or agency_id is None:
        logger.info("webhook delivery to an unknown webhook %r refused", webhook_id[:100])
        return _error(404, "not_found", "No such webhook.")
    with tenancy.agency_context(agency_id):
        webhook = Webhook.objects.select_related("agent").get(pk=wid)
        return _Delivery(webhook, headers).receive(content_length=content_length, read=read)


class _Delivery:
    """One delivery to a webhook, inside its agency's context."""

    def __init__(self, webhook: Webhook, headers: Mapping[str, str]) -> None:
        self.webhook = webhook
        self.agent: Agent = webhook.agent
        self.signature = headers.get(signing.SIGNATURE_HEADER, "")
        self.timestamp = headers.get(signing.TIMESTAMP_HEADER, "").strip()
        self.delivery_id = headers.get(signing.DELIVERY_HEADER, "").strip()
        # What the trigger log keeps of a delivery that was not authenticated: never its body.
        self.meta: dict[str, Any] = {
            "webhook": {"id": str(webhook.id), "name": webhook.name},
            "delivery_id": storable_text(self.delivery_id[: signing.MAX_DELIVERY_ID]),
        }

    def receive(  # noqa: PLR0911 - one return per refusal
        self, *, content_length: str | None, read: Callable[[int], bytes]
    ) -> DeliveryResult:
        throttle = WebhookRateThrottle(self.webhook.id)
        wait = throttle.check()
        if wait is not None:
            seconds = int(wait)
            self._refuse(
                SkipReason.THROTTLED,
                f"over the webhook's limit of {throttle.rate} deliveries; retry after {seconds} s",
            )
            return _error(
                429,
                "throttled",
                f"Too many deliveries to this webhook; retry in {seconds} seconds.",
                retry_after=seconds,
            )
        if not self.webhook.is_enabled:
            self._refuse(SkipReason.WEBHOOK_DISABLED, "the webhook is disabled")
            return _error(403, "webhook_disabled", "This webhook is disabled.")
        limit = settings.AGENTDESK_WEBHOOK_MAX_BODY_BYTES
        if _declared_length(content_length) > limit:
            return self._too_large(limit, f"Content-Length {_declared_length(content_length)}")
        refusal = self._check_headers()
        if refusal is not None:
            return refusal
        body = read(limit + 1)
        if len(body) > limit:
            return self._too_large(limit, "the body (read to one byte past the limit)")
        if not signing.signature_matches(
            self.signature,
            secrets=self.webhook.valid_secrets(),
            timestamp=self.timestamp,
            delivery_id=self.delivery_id,
            body=body,
        ):
            return self._bad_signature(
                "the signature does not match the body, timestamp and delivery id under "
                "the webhook's secret"
            )
        payload, problem = _parse(body)
        if problem is not None:
            self._refuse(SkipReason.BAD_PAYLOAD, problem)
            return _error(400, "bad_payload", f"The body must be a JSON object: {problem}.")
        return self._start(payload)

    def _check_headers(self) -> DeliveryResult | None:
        if not self.signature:
            return self._bad_signature(f"no {signing.SIGNATURE_HEADER} header")
        if not self.delivery_id:
            return self._bad_signature(
                f"no {signing.DELIVERY_HEADER} header (the delivery id is part of what is signed)"
            )
        if not signing.DELIVERY_ID.fullmatch(self.delivery_id):
            return self._bad_signature(
                f"{signing.DELIVERY_HEADER} must be 1 to {signing.MAX_DELIVERY_ID} of "
                "A-Z a-z 0-9 _ - :"
            )
        if not signing.TIMESTAMP.fullmatch(self.timestamp):
            return self._stale(f"no {signing.TIMESTAMP_HEADER} header with Unix seconds")
        tolerance = settings.AGENTDESK_WEBHOOK_TOLERANCE_SECONDS
        skew = int(time.time()) - int(self.timestamp)
        if abs(skew) > tolerance:
            when = f"{skew} s in the past" if skew > 0 else f"{-skew} s in the future"
            return self._stale(f"the timestamp is {when} (at most {tolerance} s either way)")
        return None

    # --- refusals -------------------------------------------------------------------------
    def _refuse(self, reason: str, detail: str, payload: dict[str, Any] | None = None) -> None:
        """The trigger log row of a delivery that started nothing."""
        TriggerLog.objects.create(
            agency_id=self.webhook.agency_id,
            agent=self.agent,
            site_id=self.agent.site_id,
            trigger_type=TriggerType.WEBHOOK,
            event_type=TriggerType.WEBHOOK,
            payload=payload if payload is not None else self.meta,
            outcome=TriggerOutcome.SKIPPED,
            skip_reason=reason,
            skip_detail=detail,
        )
        logger.info(
            "webhook %s delivery %r refused: %s (%s)",
            self.webhook.id,
            self.meta["delivery_id"],
            reason,
            detail,
        )

    def _bad_signature(self, detail: str) -> DeliveryResult:
        self._refuse(SkipReason.BAD_SIGNATURE, detail)
        return _error(401, "bad_signature", f"Signature refused: {detail}.")

    def _stale(self, detail: str) -> DeliveryResult:
        self._refuse(SkipReason.STALE_TIMESTAMP, detail)
        return _error(401, "stale_timestamp", f"Timestamp refused: {detail}.")

    def _too_large(self, limit: int, what: str) -> DeliveryResult:
        self._refuse(SkipReason.TOO_LARGE, f"{what} is over the limit of {limit} bytes")
        return _error(413, "too_large", f"The body is larger than {limit} bytes.")

    # --- an authenticated delivery ----------------------------------------------------------
    def _start(self, payload: dict[str, Any]) -> DeliveryResult:
        trigger_data = {**self.meta, "payload": payload}
        try:
            # A savepoint: a unique violation must not end the request's transaction, whose
            # trigger log row for the replay is still to be written. A delivery with the same
            # id under way elsewhere makes this insert wait for that transaction's end.
            with transaction.atomic():
                delivery = WebhookDelivery.objects.create(
                    agency_id=self.webhook.agency_id,
                    webhook=self.webhook,
                    delivery_id=self.delivery_id,
                )
        except IntegrityError as exc:
            if getattr(getattr(exc.__cause__, "diag", None), "constraint_name", None) != (
                DELIVERY_INDEX
            ):
                raise
            return self._replayed()
        self._touch()
        skip = _conditions_skip(self.agent, payload)
        if skip is not None:
            self._refuse(*skip, payload=trigger_data)
            return DeliveryResult(
                200,
                {
                    "execution_id": None,
                    "status": "skipped",
                    "reason": skip[0],
                    "message": f"Received; no run started: {skip[1]}.",
                    "delivery_id": self.delivery_id,
                },
            )
        execution = execution_create(
            agent=self.agent, trigger_type=TriggerType.WEBHOOK, trigger_data=trigger_data
        )
        if execution is None:
            log = (
                TriggerLog.objects.filter(
                    agent=self.agent,
                    outcome=TriggerOutcome.SKIPPED,
                    payload__contains={
                        "webhook": {"id": str(self.webhook.id)},
                        "delivery_id": self.delivery_id,
                    },
                )
                .order_by("-triggered_at")
                .first()
            )
            reason = log.skip_reason if log else SkipReason.ERROR
            detail = log.skip_detail if log else "the run was not started"
            if reason in _TRANSIENT:
                delivery.delete()  # not used up: the sender may deliver it again later
            return _error(409, reason, f"Not started: {detail}.")
        delivery.execution = execution
        delivery.save(update_fields=["execution", "updated_at"])
        return DeliveryResult(
            202,
            {
                "execution_id": str(execution.id),
                "status": execution.status,
                "delivery_id": self.delivery_id,
            },
        )

    def _replayed(self) -> DeliveryResult:
        first = (
            WebhookDelivery.objects.filter(webhook=self.webhook, delivery_id=self.delivery_id)
            .values_list("execution_id", flat=True)
            .first()
        )
        started = f"; it started run {first}" if first else ""
        self._refuse(
            SkipReason.REPLAYED, f"delivery {self.delivery_id} was received before{started}"
        )
        return _error(
            409,
            "replayed",
            f"Delivery {self.delivery_id} was received before; nothing was started again.",
            execution_id=str(first) if first else None,
        )

    def _touch(self) -> None:
        last = self.webhook.last_delivery_at
        now = timezone.now()
        if last is None or (now - last).total_seconds() > _LAST_DELIVERY_EVERY:
            Webhook.objects.filter(pk=self.webhook.pk).update(last_delivery_at=now)


def _declared_length(content_length: str | None) -> int:
    try:
        return max(0, int(content_length or 0))
    except ValueError:
        return 0  # unreadable: the bounded read decides


def _parse(body: bytes) -> tuple[dict[str, Any], str | None]:
    """The body as a JSON object, or why it is not one (storable in PostgreSQL included)."""
    try:
        value = json.loads(body.decode("utf-8"), parse_constant=_reject_constant)
    except UnicodeDecodeError:
        return {}, "it is not UTF-8"
    except ValueError as exc:
        return {}, f"it is not JSON ({exc})"
    except RecursionError:
        return {}, "it is nested too deeply"
    if not isinstance(value, dict):
        return {}, f"it is a JSON {type(value).__name__}, not an object"
    problem = unstorable(value)
    return (value, None) if problem is None else ({}, problem.rstrip("."))


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _conditions_skip(agent: Agent, payload: dict[str, Any]) -> tuple[str, str] | None:
    """The agent's ``trigger_conditions`` against the delivery's body, as event dispatch checks
    them against an event's payload (agents.services.dispatch._event_skip)."""
    conditions = agent.trigger_conditions
    if not conditions:
        return None
    try:
        validate_conditions(conditions)
    except InvalidConditions as exc:  # stored before they were checked on save
        return SkipReason.ERROR, f"trigger_conditions are invalid: {exc}"
    unmet = unmet_condition(conditions, payload)
    return (SkipReason.CONDITIONS_NOT_MET, unmet) if unmet else None
