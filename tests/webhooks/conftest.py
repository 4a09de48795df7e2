"""Webhook test helpers: a webhook with a known secret, a signed delivery, what it left behind."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from django.test import Client

from agents.models import Agent, Execution, TriggerLog
from core import tenancy

# The API tests' two agencies and the admin tests' logins, for this folder's tests too.
from tests.admin.conftest import agency, login, other_agency, staff  # noqa: F401
from tests.agents.factories import AgentFactory
from tests.api.conftest import tenant_a, tenant_b  # noqa: F401
from tests.browser.conftest import browser  # noqa: F401
from webhooks import signing
from webhooks.models import Webhook
from webhooks.services import webhook_create


@dataclass
class Hook:
    webhook: Webhook
    secret: str

    @property
    def agent(self) -> Agent:
        return self.webhook.agent

    @property
    def path(self) -> str:
        return self.webhook.path


def make_hook(agent: Agent | None = None, **agent_fields: Any) -> Hook:
    agent = agent or AgentFactory.create(**agent_fields)
    with tenancy.agency_context(agent.agency_id):
        webhook, secret = webhook_create(agent=agent, name=f"hook-{uuid.uuid4().hex[:6]}")
    return Hook(webhook, secret)


@pytest.fixture
def hook(db: None) -> Hook:
    return make_hook()


def signed_headers(
    secret: str, body: bytes, *, delivery_id: str | None = None, timestamp: int | None = None
) -> dict[str, str]:
    ts = str(int(time.time()) if timestamp is None else timestamp)
    delivery = delivery_id or uuid.uuid4().hex
    return {
        signing.DELIVERY_HEADER: delivery,
        signing.TIMESTAMP_HEADER: ts,
        signing.SIGNATURE_HEADER: signing.sign(
            secret=secret, timestamp=ts, delivery_id=delivery, body=body
        ),
    }


def encode(payload: Any) -> bytes:
    return json.dumps(payload).encode()


def deliver(
    hook: Hook,
    payload: Any = None,
    *,
    body: bytes | None = None,
    secret: str | None = None,
    headers: dict[str, str | None] | None = None,
    client: Client | None = None,
    **signing_options: Any,
) -> Any:
    """POST a delivery signed with ``secret`` (the webhook's own by default); ``headers`` replace
    or (with a value of None) drop the signed ones."""
    raw = body if body is not None else encode({"event": "test"} if payload is None else payload)
    sent = signed_headers(secret or hook.secret, raw, **signing_options)
    for name, value in (headers or {}).items():
        if value is None:
            sent.pop(name, None)
        else:
            sent[name] = value
    return (client or Client()).post(
        hook.path, data=raw, content_type="application/json", headers=sent
    )


def trigger_logs(agent: Agent) -> list[TriggerLog]:
    with tenancy.platform_context():
        return list(TriggerLog.objects.filter(agent=agent).order_by("triggered_at"))


def runs(agent: Agent) -> list[Execution]:
    with tenancy.platform_context():
        return list(Execution.objects.filter(agent=agent).order_by("created_at"))


def only_log(agent: Agent) -> TriggerLog:
    logs = trigger_logs(agent)
    assert len(logs) == 1, [(log.outcome, log.skip_reason) for log in logs]
    return logs[0]
