"""Platform events over REST: emit (validated, idempotent) and read the agency's log."""

from __future__ import annotations

import pytest
from django.test import TestCase

from core.models import ActorType, Event, Role
from tests.agents.factories import AgentFactory
from tests.api.conftest import count, fields_of, key_client
from tests.core.factories import EventFactory

URL = "/api/v1/events/"


def test_emit_records_the_event_and_dispatches_after_commit(tenant_a, as_role) -> None:
    AgentFactory.create(
        agency=tenant_a.agency, site=tenant_a.site, trigger_events=["crm.contact.created"]
    )
    body = {"event_type": "crm.contact.created", "payload": {"contact_id": "c-9"}}
    with TestCase.captureOnCommitCallbacks() as callbacks:
        response = as_role(Role.STAFF).post(URL, body, format="json")
    assert response.status_code == 202, response.json()
    event = response.json()
    assert event["payload"] == {"contact_id": "c-9"}
    assert event["actor_type"] == ActorType.USER
    assert count(Event, pk=event["id"], agency=tenant_a.agency) == 1
    assert len(callbacks) == 1  # the dispatch to the subscribed agent, once committed


def test_emit_with_an_api_key_names_the_key_as_actor(tenant_a) -> None:
    client = key_client(tenant_a.agency)
    event = client.post(URL, {"event_type": "form.submitted"}, format="json").json()
    assert event["actor_type"] == ActorType.API
    assert event["actor_id"].startswith("api_key:")


def test_the_same_idempotency_key_records_one_event(tenant_a, as_role) -> None:
    body = {"event_type": "form.submitted", "idempotency_key": "req-1"}
    first = as_role(Role.STAFF).post(URL, body, format="json")
    second = as_role(Role.STAFF).post(URL, body, format="json")
    assert (first.status_code, second.status_code) == (202, 200)
    assert first.json()["id"] == second.json()["id"]
    assert count(Event, agency=tenant_a.agency) == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"event_type": "Contact Created"}, "event_type"),
        ({"event_type": "ai.agent.created"}, "event_type"),  # reserved for the platform
        ({}, "event_type"),
        ({"event_type": "crm.contact.created", "payload": [1]}, "payload"),
        ({"event_type": "crm.contact.created", "payload": {"x": "y" * 70_000}}, "payload"),
        ({"event_type": "crm.contact.created", "actor_type": "system"}, "actor_type"),
        ({"event_type": "crm.contact.created", "site": "nope"}, "site"),
    ],
)
def test_bad_events_are_400_and_nothing_is_written(tenant_a, as_role, body, field) -> None:
    assert field in fields_of(as_role(Role.STAFF).post(URL, body, format="json"))
    assert count(Event) == 0


def test_another_agencys_site_cannot_be_named(tenant_a, tenant_b, as_role) -> None:
    body = {"event_type": "form.submitted", "site": str(tenant_b.site.id)}
    assert "site" in fields_of(as_role(Role.STAFF).post(URL, body, format="json"), 422)
    assert count(Event) == 0


@pytest.mark.parametrize("role", [Role.VIEWER, Role.APPROVER])
def test_readers_cannot_emit(tenant_a, as_role, role) -> None:
    response = as_role(role).post(URL, {"event_type": "form.submitted"}, format="json")
    assert response.status_code == 403
    assert count(Event) == 0


def test_the_log_shows_only_the_agencys_events(tenant_a, tenant_b, as_role) -> None:
    mine = EventFactory.create(agency=tenant_a.agency, event_type="crm.note.created")
    theirs = EventFactory.create(agency=tenant_b.agency)
    client = as_role(Role.VIEWER)
    assert [e["id"] for e in client.get(URL).json()["results"]] == [str(mine.id)]
    assert client.get(URL, {"event_type_prefix": "crm."}).json()["count"] == 1
    assert client.get(f"{URL}{theirs.id}/").status_code == 404
    assert "created_after" in fields_of(client.get(URL, {"created_after": "yesterday"}))
