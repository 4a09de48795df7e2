"""Managing an agent's webhooks over REST: agency admins and staff only; the secret appears in the
answer to create and rotate and nowhere else; another agency's agent or webhook is a 404."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from core import tenancy
from core.models import Role
from tests.agents.factories import AgentFactory
from tests.api.conftest import Tenant, count, fields_of, key_client, token_client
from tests.webhooks.conftest import Hook, deliver
from webhooks.models import Webhook

pytestmark = pytest.mark.django_db


def _url(agent_id: Any, *rest: str) -> str:
    return "/".join([f"/api/v1/agents/{agent_id}/webhooks", *rest, ""])


@pytest.fixture
def agent(tenant_a: Tenant) -> Any:
    return AgentFactory.create(agency=tenant_a.agency, site=tenant_a.site)


def _create(client: APIClient, agent: Any, name: str = "Shop orders") -> Any:
    return client.post(_url(agent.id), {"name": name}, format="json")


@pytest.mark.parametrize("role", [Role.ADMIN, Role.STAFF])
def test_admins_and_staff_create_a_webhook_and_see_its_secret_once(
    tenant_a: Tenant, agent: Any, role: str
) -> None:
    client = token_client(tenant_a.users[role])
    response = _create(client, agent)
    assert response.status_code == 201, response.json()
    created = response.json()
    assert created["secret"].startswith("whsec_")
    assert created["url"].endswith(f"/api/v1/webhooks/{created['id']}/")
    assert (created["agent"], created["name"], created["is_enabled"]) == (
        str(agent.id),
        "Shop orders",
        True,
    )
    assert created["created_by"] == tenant_a.users[role].pk
    listed = client.get(_url(agent.id)).json()["results"]
    assert [w["id"] for w in listed] == [created["id"]]
    shown = client.get(_url(agent.id, created["id"])).json()
    for body in (*listed, shown):
        assert "secret" not in body
        assert created["secret"] not in str(body)
    # The secret signs deliveries.
    with tenancy.platform_context():
        webhook = Webhook.objects.select_related("agent").get(pk=created["id"])
    assert deliver(Hook(webhook, created["secret"])).status_code == 202


@pytest.mark.parametrize("role", [Role.VIEWER, Role.APPROVER])
def test_viewers_and_approvers_may_not_see_or_manage_webhooks(
    tenant_a: Tenant, agent: Any, role: str
) -> None:
    with tenancy.agency_context(tenant_a.agency.id):
        from webhooks.services import webhook_create

        webhook, _secret = webhook_create(agent=agent, name="existing")
    for client in (token_client(tenant_a.users[role]), key_client(tenant_a.agency, role)):
        assert client.get(_url(agent.id)).status_code == 403
        assert client.get(_url(agent.id, str(webhook.id))).status_code == 403
        assert _create(client, agent).status_code == 403
        assert client.post(_url(agent.id, str(webhook.id), "rotate"), {}).status_code == 403
        assert client.delete(_url(agent.id, str(webhook.id))).status_code == 403
    assert count(Webhook) == 1


def test_another_agencys_user_or_key_cannot_reach_a_webhook(
    tenant_a: Tenant, tenant_b: Tenant, agent: Any
) -> None:
    created = _create(token_client(tenant_a.users[Role.ADMIN]), agent).json()
    theirs = AgentFactory.create(agency=tenant_b.agency, site=tenant_b.site)
    for client in (
        token_client(tenant_b.users[Role.ADMIN]),
        key_client(tenant_b.agency, Role.ADMIN),
    ):
        # A's agent, and A's webhook under B's own agent: both are "no such thing".
        for agent_id in (agent.id, theirs.id):
            assert client.get(_url(agent_id, created["id"])).status_code == 404
            assert (
                client.patch(
                    _url(agent_id, created["id"]), {"is_enabled": False}, format="json"
                ).status_code
                == 404
            )
            assert client.post(_url(agent_id, created["id"], "rotate"), {}).status_code == 404
            assert client.delete(_url(agent_id, created["id"])).status_code == 404
        assert client.get(_url(agent.id)).status_code == 404
        assert _create(client, agent).status_code == 404
        assert client.get(_url(theirs.id)).json()["results"] == []
    with tenancy.platform_context():
        webhook = Webhook.objects.get(pk=created["id"])
    assert (webhook.is_enabled, webhook.rotated_at, webhook.agent_id) == (True, None, agent.id)
    assert count(Webhook) == 1


def test_rotate_answers_a_new_secret_and_keeps_the_old_one_for_the_grace(
    tenant_a: Tenant, agent: Any
) -> None:
    client = token_client(tenant_a.users[Role.STAFF])
    created = _create(client, agent).json()
    rotated = client.post(
        _url(agent.id, created["id"], "rotate"), {"grace_seconds": 600}, format="json"
    )
    assert rotated.status_code == 200, rotated.json()
    body = rotated.json()
    assert body["secret"].startswith("whsec_")
    assert body["secret"] != created["secret"]
    assert body["rotated_at"] is not None
    assert body["previous_secret_valid_until"] is not None
    with tenancy.platform_context():
        webhook = Webhook.objects.select_related("agent").get(pk=created["id"])
    assert deliver(Hook(webhook, created["secret"])).status_code == 202
    assert deliver(Hook(webhook, body["secret"])).status_code == 202
    at_once = client.post(
        _url(agent.id, created["id"], "rotate"), {"grace_seconds": 0}, format="json"
    ).json()
    assert at_once["previous_secret_valid_until"] is None
    assert deliver(Hook(webhook, body["secret"])).status_code == 401
    assert deliver(Hook(webhook, at_once["secret"])).status_code == 202


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"grace_seconds": -1}, "grace_seconds"),
        ({"grace_seconds": 7 * 24 * 3600 + 1}, "grace_seconds"),
        ({"grace": 60}, "grace"),
    ],
)
def test_a_bad_rotate_body_is_400_and_changes_nothing(
    tenant_a: Tenant, agent: Any, body: dict[str, Any], field: str
) -> None:
    client = token_client(tenant_a.users[Role.STAFF])
    created = _create(client, agent).json()
    response = client.post(_url(agent.id, created["id"], "rotate"), body, format="json")
    assert field in fields_of(response)
    assert count(Webhook, pk=created["id"], rotated_at__isnull=True) == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [({"name": ""}, "name"), ({}, "name"), ({"name": "x", "secret": "mine"}, "secret")],
)
def test_a_bad_create_body_is_400_and_creates_nothing(
    tenant_a: Tenant, agent: Any, body: dict[str, Any], field: str
) -> None:
    response = token_client(tenant_a.users[Role.STAFF]).post(_url(agent.id), body, format="json")
    assert field in fields_of(response)
    assert count(Webhook) == 0


def test_a_second_webhook_of_the_same_name_is_400(tenant_a: Tenant, agent: Any) -> None:
    client = token_client(tenant_a.users[Role.STAFF])
    assert _create(client, agent).status_code == 201
    assert "name" in fields_of(_create(client, agent))
    assert count(Webhook) == 1


def test_disable_then_delete(tenant_a: Tenant, agent: Any) -> None:
    client = key_client(tenant_a.agency, Role.ADMIN)
    created = _create(client, agent).json()
    with tenancy.platform_context():
        webhook = Webhook.objects.select_related("agent").get(pk=created["id"])
    hook = Hook(webhook, created["secret"])
    patched = client.patch(_url(agent.id, created["id"]), {"is_enabled": False}, format="json")
    assert patched.status_code == 200
    assert patched.json()["is_enabled"] is False
    assert deliver(hook).status_code == 403
    assert client.patch(_url(agent.id, created["id"]), {"is_enabled": True}, format="json").json()[
        "is_enabled"
    ]
    assert deliver(hook).status_code == 202
    assert client.delete(_url(agent.id, created["id"])).status_code == 204
    assert count(Webhook) == 0
    assert deliver(hook).status_code == 404


def test_the_schema_documents_the_operations_with_examples(db: None) -> None:
    schema = APIClient().get("/api/schema/?format=json").json()
    operations = {
        op["operationId"]: op
        for path, item in schema["paths"].items()
        if "/webhooks/" in path
        for op in item.values()
    }
    assert set(operations) == {
        "webhooks_list", "webhooks_create", "webhooks_retrieve", "webhooks_partial_update",
        "webhooks_destroy", "webhooks_rotate",
    }  # fmt: skip
    created = operations["webhooks_create"]["responses"]["201"]["content"]["application/json"]
    assert created["examples"]["Created"]["value"]["secret"].startswith("whsec_")
    rotate = operations["webhooks_rotate"]["requestBody"]["content"]["application/json"]
    assert rotate["examples"]
    # The receiving end takes no credential: it is in the README, not among these operations.
    assert not any("receive" in name for name in operations)
