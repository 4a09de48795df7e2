"""Outbound webhooks over REST: agency admins and staff only; the secret in the answers to create
and rotate and nowhere else; a 400 or 422 naming what is wrong with a URL or an event type; another
agency's subscription or delivery is a 404; a delivery sent again by hand. A URL or event type of
the wrong form is a 400, one of the right form that cannot be used a 422."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import override_settings

from core import tenancy
from core.events import event_emit
from core.models import Role
from tests.api.conftest import Tenant, fields_of, key_client, token_client
from webhooks.outbound.models import Delivery, Subscription

pytestmark = pytest.mark.django_db
URL = "/api/v1/outbound-webhooks/"
RECEIVER = "http://127.0.0.1:9/hook"


def _body(**extra: object) -> dict[str, object]:
    return {"name": "Ops", "url": RECEIVER, "event_types": ["ai.execution.failed"], **extra}


def _create(client: Any, **extra: object) -> Any:
    return client.post(URL, _body(**extra), format="json")


@pytest.mark.parametrize("role", [Role.ADMIN, Role.STAFF])
def test_admins_and_staff_subscribe_and_see_the_secret_once(tenant_a: Tenant, role: str) -> None:
    client = token_client(tenant_a.users[role])
    created = _create(client, event_types=["ai.execution.*", "ai.approval.requested"])
    assert created.status_code == 201, created.json()
    secret = created.json()["secret"]
    assert secret.startswith("whsec_")
    sid = created.json()["id"]
    with tenancy.agency_context(tenant_a.agency.id):
        stored = Subscription.objects.get(pk=sid)
    assert secret not in stored.secret_encrypted
    for answer in (
        client.get(URL),
        client.get(f"{URL}{sid}/"),
        client.patch(f"{URL}{sid}/", {"name": "Ops 2"}, format="json"),
        client.get(f"{URL}{sid}/deliveries/"),
    ):
        assert answer.status_code == 200, answer.json()
        assert secret not in answer.content.decode()
        assert '"secret"' not in answer.content.decode()
    rotated = client.post(f"{URL}{sid}/rotate/", {"overlap_seconds": 600}, format="json")
    assert rotated.status_code == 200, rotated.json()
    assert rotated.json()["secret"] not in (secret, "")
    assert rotated.json()["previous_secret_signs_until"] is not None
    assert rotated.json()["secret"] not in client.get(f"{URL}{sid}/").content.decode()


@pytest.mark.parametrize("role", [Role.VIEWER, Role.APPROVER])
def test_viewers_and_approvers_may_not_see_them(tenant_a: Tenant, role: str) -> None:
    client = token_client(tenant_a.users[role])
    assert client.get(URL).status_code == 403
    assert _create(client).status_code == 403


@pytest.mark.parametrize(
    ("field", "value", "status", "words"),
    [
        # The wrong form: the schema says so (400).
        ("url", "ftp://example.com/hook", 400, "must start with https:// or http://"),
        ("url", "not a url at all", 400, "must start with https:// or http://"),
        ("event_types", ["AI.Execution"], 400, "Not an event type"),
        ("event_types", ["ai.**"], 400, "Not an event type"),
        ("event_types", [], 400, "at least 1"),
        # The right form, but not usable (422).
        ("url", "http://169.254.169.254/latest", 422, "cloud metadata address"),
        ("url", "http://10.1.2.3/hook", 422, "private address"),
        ("event_types", ["ai.execution.complete"], 422, "not an event the platform emits"),
    ],
)
def test_a_bad_url_or_event_type_is_refused_saying_why(
    tenant_a: Tenant, field: str, value: object, status: int, words: str
) -> None:
    client = token_client(tenant_a.users[Role.ADMIN])
    answer = _create(client, **{field: value})
    errors = fields_of(answer, status)
    assert words in json.dumps(errors[field]), errors
    with tenancy.agency_context(tenant_a.agency.id):
        assert not Subscription.objects.exists()


@override_settings(AGENTDESK_OUTBOUND_WEBHOOK_ALLOW_HTTP=False)
def test_outside_development_only_https_urls_are_taken(tenant_a: Tenant) -> None:
    client = token_client(tenant_a.users[Role.ADMIN])
    errors = fields_of(_create(client), 422)
    assert "must start with https://" in errors["url"][0]


@override_settings(AGENTDESK_OUTBOUND_WEBHOOK_PRIVATE_NETWORKS=[])
def test_a_loopback_receiver_is_refused_outside_the_tests_settings(tenant_a: Tenant) -> None:
    client = token_client(tenant_a.users[Role.ADMIN])
    errors = fields_of(_create(client), 422)
    assert "loopback address" in errors["url"][0]


def _delivery(tenant: Tenant, subscription_id: str) -> Delivery:
    with tenancy.agency_context(tenant.agency.id):
        event_emit(agency_id=tenant.agency.id, event_type="ai.execution.failed")
        return Delivery.objects.get(subscription_id=subscription_id)


def test_another_agencys_subscriptions_and_deliveries_are_404(
    tenant_a: Tenant, tenant_b: Tenant
) -> None:
    owner = token_client(tenant_a.users[Role.ADMIN])
    sid = _create(owner).json()["id"]
    delivery = _delivery(tenant_a, sid)
    intruder = key_client(tenant_b.agency, Role.ADMIN)
    assert intruder.get(URL).json()["results"] == []
    for method, path, body in [
        ("get", f"{URL}{sid}/", None),
        ("patch", f"{URL}{sid}/", {"is_active": False}),
        ("delete", f"{URL}{sid}/", None),
        ("post", f"{URL}{sid}/rotate/", {}),
        ("get", f"{URL}{sid}/deliveries/", None),
        ("get", f"{URL}{sid}/deliveries/{delivery.pk}/", None),
        ("post", f"{URL}{sid}/deliveries/{delivery.pk}/resend/", {}),
    ]:
        answer = getattr(intruder, method)(path, body, format="json")
        assert answer.status_code == 404, (method, path, answer.content)
    with tenancy.agency_context(tenant_a.agency.id):
        kept = Subscription.objects.get(pk=sid)
    assert kept.is_active


def test_deliveries_are_listed_with_their_attempts_and_sent_again_on_request(
    tenant_a: Tenant,
) -> None:
    client = token_client(tenant_a.users[Role.STAFF])
    sid = _create(client).json()["id"]
    delivery = _delivery(tenant_a, sid)
    listed = client.get(f"{URL}{sid}/deliveries/").json()["results"]
    assert [(d["id"], d["event_type"], d["status"]) for d in listed] == [
        (str(delivery.pk), "ai.execution.failed", "pending")
    ]
    assert listed[0]["message_id"] == delivery.message_id
    assert listed[0]["attempt_log"] == []
    resent = client.post(f"{URL}{sid}/deliveries/{delivery.pk}/resend/", {}, format="json")
    assert resent.status_code == 202, resent.json()
    assert (
        client.post(
            f"{URL}{sid}/deliveries/{delivery.pk}/resend/", {"force": True}, format="json"
        ).status_code
        == 400
    )
    client.patch(f"{URL}{sid}/", {"is_active": False}, format="json")
    refused = client.post(f"{URL}{sid}/deliveries/{delivery.pk}/resend/", {}, format="json")
    assert refused.status_code == 400
    assert refused.json()["code"] == "subscription_inactive"
