"""Outbound webhooks in the admin: staff subscribe a URL and see its secret once (then it signs
a delivery the reference code verifies), a bad URL or event type is a form error, a delivery is
sent again from its list; viewers do not see them."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client
from standardwebhooks import Webhook as Verifier

from core import tenancy
from core.events import event_emit
from core.models import Agency, Role, User
from tests.admin.conftest import member
from tests.admin.helpers import admin_url, change_url
from tests.webhooks.receiver import Receiver
from webhooks.outbound.models import Delivery, DeliveryStatus, Subscription
from webhooks.outbound.sending import delivery_attempt

pytestmark = pytest.mark.django_db
SECRET = re.compile(r"whsec_[A-Za-z0-9+/=]+")


def _messages(response: Any) -> list[str]:
    return [str(m) for m in response.context["messages"]]


def _add(client: Client, **fields: str) -> Any:
    form = {
        "name": "Ops",
        "url": "http://127.0.0.1:9/hook",
        "event_types": "ai.execution.failed,ai.approval.*",
        "is_active": "on",
        **fields,
    }
    return client.post(admin_url(Subscription, "add"), form, follow=True)


def test_staff_subscribe_and_see_the_secret_once(
    agency: Agency, staff: User, login: Callable[[User], Client]
) -> None:
    client = login(staff)
    with Receiver(200).running() as receiver:
        response = _add(client, url=receiver.url)
        assert response.status_code == 200
        with tenancy.agency_context(agency.id):
            subscription = Subscription.objects.get()
        assert subscription.event_types == ["ai.execution.failed", "ai.approval.*"]
        assert subscription.created_by_id == staff.pk
        [shown] = [m for m in _messages(response) if "whsec_" in m]
        secret = SECRET.search(shown).group(0)  # type: ignore[union-attr]
        for page in (
            client.get(change_url(subscription)),
            client.get(admin_url(Subscription, "changelist")),
        ):
            assert page.status_code == 200
            assert secret not in page.content.decode()
        with tenancy.agency_context(agency.id):
            event_emit(agency_id=agency.id, event_type="ai.execution.failed")
            delivery = Delivery.objects.get()
        assert delivery_attempt(delivery_id=delivery.pk, agency_id=agency.id)
    [request] = receiver.received
    Verifier(secret).verify(request.body, request.headers)


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("url", "http://10.0.0.5/hook", "private address"),
        ("event_types", "ai.execution.complete", "not an event the platform emits"),
    ],
)
def test_a_bad_url_or_event_type_is_a_form_error(
    agency: Agency,
    staff: User,
    *,
    login: Callable[[User], Client],
    field: str,
    value: str,
    words: str,
) -> None:
    response = _add(login(staff), **{field: value})
    assert words in response.content.decode()
    with tenancy.agency_context(agency.id):
        assert not Subscription.objects.exists()


def test_a_failed_delivery_is_sent_again_from_its_list(
    agency: Agency, staff: User, login: Callable[[User], Client]
) -> None:
    client = login(staff)
    with Receiver(500, 200).running() as receiver:
        _add(client, url=receiver.url)
        with tenancy.agency_context(agency.id):
            event_emit(agency_id=agency.id, event_type="ai.execution.failed")
            delivery = Delivery.objects.get()
            Delivery.objects.filter(pk=delivery.pk).update(status=DeliveryStatus.FAILED)
        response = client.post(
            admin_url(Delivery, "changelist"),
            {"action": "resend", "_selected_action": [str(delivery.pk)]},
            follow=True,
        )
        assert "1 delivery(ies) sent again." in _messages(response)
        # The action sent one manual attempt to the notify queue; made here, as the worker would.
        assert delivery_attempt(delivery_id=delivery.pk, agency_id=agency.id, manual=True)
        assert delivery_attempt(delivery_id=delivery.pk, agency_id=agency.id, manual=True)
    with tenancy.agency_context(agency.id):
        done = Delivery.objects.get(pk=delivery.pk)
        attempts = [(a.manual, a.status_code) for a in done.attempt_log.order_by("number")]
    assert attempts == [(True, 500), (True, 200)]
    assert done.status == DeliveryStatus.SUCCEEDED
    assert client.get(change_url(done)).status_code == 200


@pytest.mark.parametrize("role", [Role.VIEWER, Role.APPROVER])
def test_viewers_and_approvers_do_not_see_outbound_webhooks(
    agency: Agency, login: Callable[[User], Client], role: str
) -> None:
    client = login(member(agency, role))
    assert client.get(admin_url(Subscription, "changelist")).status_code == 403
    assert client.get(admin_url(Delivery, "changelist")).status_code == 403
