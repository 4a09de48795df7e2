"""Writers of outbound webhook subscriptions: create (the secret returned once), change, rotate
the secret with an overlap, delete; a delivery sent again by hand. Sending: :mod:`.sending`.

Every writer's precondition: in the subscription's agency context.
"""

from __future__ import annotations

import uuid
from ipaddress import ip_network

import httpx
from django.conf import settings
from django.db import IntegrityError, transaction

from core.exceptions import ApplicationError
from tools.net import FetchError, IPNetwork, pin_url, system_resolver
from webhooks.outbound import signing
from webhooks.outbound.events import BadEventTypes, clean_event_types
from webhooks.outbound.listener import send_deliver_on_commit
from webhooks.outbound.models import Delivery, Subscription
from webhooks.rotation import rotate_secret

MAX_NAME = 200
MAX_URL = 2000
MAX_OVERLAP_SECONDS = 7 * 24 * 3600


def _invalid(field: str, message: str) -> ApplicationError:
    return ApplicationError("invalid", message, fields={field: [message]})


def _refused(field: str, code: str, message: str) -> ApplicationError:
    """A value of the right form that cannot be used (an address refused, an event the platform
    does not emit): the API's 422 (README "Errors")."""
    return ApplicationError(code, message, status=422, fields={field: [message]})


def allowed_private_networks() -> tuple[IPNetwork, ...]:
    """``AGENTDESK_OUTBOUND_WEBHOOK_PRIVATE_NETWORKS``: non-public networks deliveries may go to
    (the test settings' loopback receivers). Cloud metadata addresses never."""
    return tuple(ip_network(net) for net in settings.AGENTDESK_OUTBOUND_WEBHOOK_PRIVATE_NETWORKS)


def clean_url(url: str) -> str:
    """``url`` if deliveries may go there: https (http only where
    ``AGENTDESK_OUTBOUND_WEBHOOK_ALLOW_HTTP``), a host that resolves to public addresses only.
    Checked again at every send (the address a name resolves to may change)."""
    url = url.strip()
    if not url:
        raise _invalid("url", "The subscription needs a URL.")
    if len(url) > MAX_URL:
        raise _invalid("url", f"At most {MAX_URL} characters.")
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise _refused("url", "invalid_url", f"Not a URL: {exc}.") from None
    schemes = ("https", "http") if settings.AGENTDESK_OUTBOUND_WEBHOOK_ALLOW_HTTP else ("https",)
    if parsed.scheme not in schemes:
        shown = " or ".join(f"{scheme}://" for scheme in schemes)
        raise _refused("url", "invalid_url", f"The URL must start with {shown}.")
    if parsed.fragment:
        raise _invalid("url", "The URL must not have a #fragment.")
    try:
        pin_url(
            parsed, resolver=system_resolver, allowed_private_networks=allowed_private_networks()
        )
    except FetchError as exc:
        raise _refused("url", "invalid_url", exc.message) from None
    return url


def _clean(*, name: str, event_types: list[str]) -> tuple[str, list[str]]:
    name = name.strip()
    if not name:
        raise _invalid("name", "The subscription needs a name.")
    if len(name) > MAX_NAME:
        raise _invalid("name", f"At most {MAX_NAME} characters.")
    try:
        return name, clean_event_types(event_types)
    except BadEventTypes as exc:
        raise _refused("event_types", "invalid_event_types", str(exc)) from None


def _saved(subscription: Subscription, **kwargs: list[str]) -> None:
    try:
        with transaction.atomic():
            subscription.save(**kwargs)  # type: ignore[arg-type]
    except IntegrityError as exc:
        if "webhooks_subscription_name" in str(exc):
            message = "The agency already has an outbound webhook of this name."
            raise _invalid("name", message) from None
        raise


def subscription_create(
    *,
    agency_id: uuid.UUID,
    name: str,
    url: str,
    event_types: list[str],
    is_active: bool = True,
    created_by_id: int | None = None,
) -> tuple[Subscription, str]:
    """A new subscription; returns it and its secret, which exists in plaintext only in this
    return value (it is stored encrypted)."""
    name, event_types = _clean(name=name, event_types=event_types)
    subscription = Subscription(
        agency_id=agency_id,
        name=name,
        url=clean_url(url),
        event_types=event_types,
        is_active=is_active,
        created_by_id=created_by_id,
    )
    secret = signing.new_secret()
    subscription.set_secret(secret)
    _saved(subscription)
    return subscription, secret


def subscription_update(
    *,
    subscription: Subscription,
    name: str | None = None,
    url: str | None = None,
    event_types: list[str] | None = None,
    is_active: bool | None = None,
) -> Subscription:
    """Change what is given. Activating it again (after an automatic disabling) clears its
    failure count: its next failure is the first."""
    fields = ["updated_at"]
    if name is not None or event_types is not None:
        cleaned_name, cleaned_types = _clean(
            name=subscription.name if name is None else name,
            event_types=subscription.event_types if event_types is None else event_types,
        )
        subscription.name, subscription.event_types = cleaned_name, cleaned_types
        fields += ["name", "event_types"]
    if url is not None:
        subscription.url = clean_url(url)
        fields.append("url")
    if is_active is not None:
        if is_active and not subscription.is_active:
            subscription.consecutive_failures = 0
            subscription.disabled_at = None
            fields += ["consecutive_failures", "disabled_at"]
        subscription.is_active = is_active
        fields.append("is_active")
    _saved(subscription, update_fields=fields)
    return subscription


def subscription_rotate(
    *, subscription: Subscription, overlap_seconds: int | None = None
) -> tuple[Subscription, str]:
    """A new secret (returned, shown once). For ``overlap_seconds`` (default
    ``AGENTDESK_OUTBOUND_WEBHOOK_ROTATION_OVERLAP_SECONDS``; 0: none) deliveries are signed with
    the previous secret too, so that the receiver can switch without refusing any. Locks the row:
    two rotations at once do not lose a secret."""
    if overlap_seconds is None:
        overlap_seconds = settings.AGENTDESK_OUTBOUND_WEBHOOK_ROTATION_OVERLAP_SECONDS
    if not 0 <= overlap_seconds <= MAX_OVERLAP_SECONDS:
        raise _invalid("overlap_seconds", f"Between 0 and {MAX_OVERLAP_SECONDS} seconds (7 days).")
    return rotate_secret(
        subscription, overlap_seconds=overlap_seconds, new_secret=signing.new_secret
    )


def subscription_delete(*, subscription: Subscription) -> None:
    """Delete it with its deliveries and their attempts (a message already sent to a worker
    finds nothing and does nothing)."""
    subscription.delete()


def delivery_resend(*, delivery: Delivery) -> None:
    """Send ``delivery`` once more, now (its body and ``webhook-id`` unchanged, so the receiver
    can tell it from a new event), whatever it came to. The attempt is logged as manual; it
    succeeds the delivery or leaves it as it was (a pending one keeps its retries). Refused
    while its subscription is inactive (nothing would be sent)."""
    if not delivery.subscription.is_active:
        raise ApplicationError(
            "subscription_inactive",
            "The outbound webhook is inactive (disabled): activate it to send again.",
        )
    send_deliver_on_commit(delivery.pk, delivery.agency_id, manual=True)
