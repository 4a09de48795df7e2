"""``Idempotency-Key`` on POST /agents/{id}/execute: a retry gets the first answer, a different
request with the key is a 422, keys are per credential and agency, expire, and two concurrent
requests with one key start one run."""

from __future__ import annotations

import datetime
import threading
import time
from typing import Any

import pytest
from django.test import override_settings
from django.utils import timezone
from rest_framework.test import APIClient

from agents.api import views as agent_views
from agents.models import Execution, TriggerLog
from core import tenancy
from core.api.idempotency import IdempotencyRecord, purge_expired_idempotency_records
from core.models import Role
from tests.agents.factories import AgentFactory
from tests.api.conftest import count, key_client, make_tenant, new_key, token_client


@pytest.fixture
def agent(tenant_a):
    return AgentFactory.create(agency=tenant_a.agency, site=tenant_a.site)


def url(agent: Any) -> str:
    return f"/api/v1/agents/{agent.id}/execute/"


def post(client: APIClient, agent: Any, key: str | None, **body: Any) -> Any:
    headers = {"Idempotency-Key": key} if key is not None else {}
    return client.post(url(agent), body or {"input": "Follow up"}, format="json", headers=headers)


def test_the_same_key_returns_the_same_execution(agent, tenant_a) -> None:
    client = key_client(tenant_a.agency)
    first = post(client, agent, "order-42")
    assert first.status_code == 202, first.json()
    assert "Idempotent-Replayed" not in first
    again = post(client, agent, "order-42")
    assert again.status_code == 202
    assert again.content == first.content  # the same body, byte for byte
    assert again["Idempotent-Replayed"] == "true"
    assert count(Execution, agent=agent) == 1
    assert count(TriggerLog, agent=agent) == 1


def test_the_same_key_with_a_different_body_is_422_and_starts_nothing(agent, tenant_a) -> None:
    client = key_client(tenant_a.agency)
    assert post(client, agent, "k1", input="one").status_code == 202
    response = post(client, agent, "k1", input="two")
    assert response.status_code == 422
    body = response.json()
    assert set(body) == {"message", "code", "extra"}
    assert body["code"] == "idempotency_key_reused"
    assert count(Execution, agent=agent) == 1


def test_the_same_key_on_another_agent_is_422(agent, tenant_a) -> None:
    other = AgentFactory.create(agency=tenant_a.agency, site=tenant_a.site)
    client = key_client(tenant_a.agency)
    assert post(client, agent, "k1").status_code == 202
    assert post(client, other, "k1").status_code == 422
    assert count(Execution, agent=other) == 0


def test_different_keys_start_different_runs_and_no_key_is_not_remembered(agent, tenant_a) -> None:
    client = key_client(tenant_a.agency)
    ids = {post(client, agent, key).json()["execution_id"] for key in ("a", "b")}
    ids |= {post(client, agent, None).json()["execution_id"] for _ in range(2)}
    assert len(ids) == 4
    assert count(IdempotencyRecord) == 2


def test_keys_belong_to_one_credential(agent, tenant_a, tenant_b) -> None:
    """Another API key, a user, another agency: the same key string is a new request each."""
    first = post(key_client(tenant_a.agency), agent, "shared").json()["execution_id"]
    second = post(key_client(tenant_a.agency), agent, "shared").json()["execution_id"]
    third = post(token_client(tenant_a.users[Role.STAFF]), agent, "shared").json()
    assert len({first, second, third["execution_id"]}) == 3
    other_agent = AgentFactory.create(agency=tenant_b.agency, site=tenant_b.site)
    assert post(key_client(tenant_b.agency), other_agent, "shared").status_code == 202
    # And another agency's key cannot reach this agency's agent at all.
    assert post(key_client(tenant_b.agency), agent, "shared").status_code == 404


def test_a_refused_request_is_not_remembered(agent, tenant_a) -> None:
    client = key_client(tenant_a.agency)
    bad = post(client, agent, "k", input=5, unknown=True)
    assert bad.status_code == 400
    with tenancy.agency_context(tenant_a.agency.id):
        agent.is_active = False
        agent.save(update_fields=["is_active"])
    assert post(client, agent, "k").status_code == 409
    assert count(IdempotencyRecord) == 0
    with tenancy.agency_context(tenant_a.agency.id):
        agent.is_active = True
        agent.save(update_fields=["is_active"])
    assert post(client, agent, "k").status_code == 202  # the retry runs now
    assert post(client, agent, "k")["Idempotent-Replayed"] == "true"


@pytest.mark.parametrize("key", ["", " ", "x" * 256, "caf\u00e9", "a\tb"])
def test_a_malformed_key_is_400_and_starts_nothing(agent, tenant_a, key) -> None:
    response = post(key_client(tenant_a.agency), agent, key)
    assert response.status_code == 400, response.json()
    assert "Idempotency-Key" in response.json()["message"]
    assert count(Execution, agent=agent) == 0


def test_an_expired_key_may_be_used_again_and_expired_rows_are_purged(agent, tenant_a) -> None:
    client = key_client(tenant_a.agency)
    first = post(client, agent, "old").json()["execution_id"]
    with tenancy.agency_context(tenant_a.agency.id):
        IdempotencyRecord.objects.update(expires_at=timezone.now() - datetime.timedelta(seconds=1))
    second = post(client, agent, "old", input="something else")
    assert second.status_code == 202
    assert second.json()["execution_id"] != first
    with tenancy.agency_context(tenant_a.agency.id):
        record = IdempotencyRecord.objects.get()
        expected = timezone.now() + datetime.timedelta(hours=24)
        assert abs(record.expires_at - expected) < datetime.timedelta(minutes=1)
        IdempotencyRecord.objects.update(expires_at=timezone.now() - datetime.timedelta(seconds=1))
    with tenancy.platform_context():
        assert purge_expired_idempotency_records() == 1
    assert count(IdempotencyRecord) == 0


@override_settings(AGENTDESK_IDEMPOTENCY_KEY_HOURS=2)
def test_how_long_keys_are_kept_is_a_setting(agent, tenant_a) -> None:
    post(key_client(tenant_a.agency), agent, "k")
    with tenancy.agency_context(tenant_a.agency.id):
        record = IdempotencyRecord.objects.get()
    assert record.expires_at - record.created_at < datetime.timedelta(hours=2, seconds=5)
    assert record.expires_at - record.created_at > datetime.timedelta(hours=1, minutes=59)


def test_the_header_is_in_the_schema(db) -> None:
    schema = APIClient().get("/api/schema/", {"format": "json"}).json()
    operation = schema["paths"]["/api/v1/agents/{id}/execute/"]["post"]
    headers = [p for p in operation["parameters"] if p["in"] == "header"]
    assert [p["name"] for p in headers] == ["Idempotency-Key"]
    assert "422" in operation["responses"]


def test_concurrent_requests_with_one_key_start_one_run(live_db, monkeypatch) -> None:
    """The second request waits on the unique index while the first is still running, then
    answers with the first's execution: one run, whatever the timing."""
    tenant = make_tenant()
    agent = AgentFactory.create(agency=tenant.agency, site=tenant.site)
    full_key = new_key(tenant.agency)
    real_create = agent_views.execution_create

    def slow_create(**kwargs: Any) -> Any:
        time.sleep(0.5)  # the other request arrives meanwhile
        return real_create(**kwargs)

    monkeypatch.setattr(agent_views, "execution_create", slow_create)
    barrier = threading.Barrier(3)
    answers: list[Any] = []

    def send() -> None:
        from django.db import connections

        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {full_key}")
        barrier.wait()
        try:
            answers.append(post(client, agent, "concurrent"))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=send) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert [a.status_code for a in answers] == [202, 202, 202]
    assert len({a.json()["execution_id"] for a in answers}) == 1
    assert sorted(a.get("Idempotent-Replayed", "") for a in answers) == ["", "true", "true"]
    assert count(Execution, agent=agent) == 1
