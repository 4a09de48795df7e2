"""An event whose dispatch message is lost is dispatched again by beat's reaper.

The message is lost for real at the network boundary: Celery's send raises the
``kombu.exceptions.OperationalError`` it raises when the broker is unreachable. The emit still
succeeds (the event is committed), and once the event has been unprocessed for
AGENTDESK_EVENT_REDISPATCH_SECONDS the reaper sends its dispatch again, once per period, oldest
first. What the reaper sends is read from Celery's own publish signal and then run as a worker
would run it.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from celery.signals import after_task_publish
from django.db import transaction
from django.utils import timezone
from kombu import Producer
from kombu.exceptions import OperationalError
from pytest_django.fixtures import Settings
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from agents import tasks
from agents.models import Execution, TriggerLog, TriggerOutcome
from agents.tasks import dispatch_event, reap_expired_leases
from config.celery_app import app
from core import tenancy
from core.events import event_emit
from core.models import Agency, Event, Role
from tests.agents.factories import AgentFactory
from tests.factories import AgencyFactory, MembershipFactory

EVENT_TYPE = "crm.contact.created"
REDISPATCH_SECONDS = 60


@pytest.fixture(autouse=True)
def _period(live_db: None, settings: Settings) -> None:
    settings.AGENTDESK_EVENT_REDISPATCH_SECONDS = REDISPATCH_SECONDS


@pytest.fixture
def published() -> Iterator[list[tuple[str, dict[str, Any]]]]:
    """(event id, kwargs) of every dispatch this process publishes from now on.

    The message stops at the broker's door (kombu's publish sends nothing): a worker that other
    tests of the session left running would otherwise take it and dispatch the event itself,
    behind the test's back. The test runs what was sent as that worker would."""
    sent: list[tuple[str, dict[str, Any]]] = []

    def record(sender: Any = None, body: Any = None, **kwargs: Any) -> None:
        if sender == "agents.dispatch_event":
            args, task_kwargs, _embed = body  # protocol 2
            sent.append((str(args[0]), dict(task_kwargs)))

    after_task_publish.connect(record, weak=False)
    with pytest.MonkeyPatch.context() as patch:  # not undone by the test's monkeypatch.undo()
        patch.setattr(Producer, "publish", lambda self, *args, **kwargs: None)
        yield sent
    after_task_publish.disconnect(record)


@pytest.fixture
def broker_down(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every Celery send fails as it does when Redis is unreachable, until the test restores it
    with ``monkeypatch.undo()``."""

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise OperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr(app, "send_task", refuse)


def _subscribed_agency() -> Agency:
    agency = AgencyFactory.create()
    AgentFactory.create(agency=agency, trigger_events=[EVENT_TYPE])
    return agency


def _emit(agency: Agency, key: str = "") -> Event:
    with tenancy.agency_context(agency.id):
        return event_emit(agency_id=agency.id, event_type=EVENT_TYPE, idempotency_key=key)


def _unprocessed_for(event: Event, seconds: float, *, created_days_ago: int = 0) -> None:
    """As if the event had been written (or last sent again) ``seconds`` ago."""
    now = timezone.now()
    with tenancy.platform_context():
        changed = Event.objects.filter(pk=event.pk).update(
            updated_at=now - datetime.timedelta(seconds=seconds),
            created_at=now - datetime.timedelta(days=created_days_ago, seconds=seconds),
        )
    assert changed == 1


def _event(event: Event) -> Event:
    with tenancy.platform_context():
        return Event.objects.get(pk=event.pk)


def _runs_for(event: Event) -> int:
    with tenancy.platform_context():
        return Execution.objects.filter(trigger_event_id=event.pk).count()


def _sent_for(published: list[tuple[str, dict[str, Any]]], event: Event) -> int:
    return sum(1 for event_id, _ in published if event_id == str(event.id))


def test_an_api_emit_while_the_broker_is_down_is_accepted_and_dispatched_later(
    broker_down: None,
    monkeypatch: pytest.MonkeyPatch,
    published: list[tuple[str, dict[str, Any]]],
) -> None:
    agency = _subscribed_agency()
    user = MembershipFactory.create(agency=agency, role=Role.STAFF).user
    client = APIClient(raise_request_exception=False)
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    body = {"event_type": EVENT_TYPE, "idempotency_key": f"req-{uuid.uuid4().hex}"}

    first = client.post("/api/v1/events/", body, format="json")
    assert first.status_code == 202, first.content  # committed, so not a 500
    retry = client.post("/api/v1/events/", body, format="json")
    assert retry.status_code == 200, retry.content  # the client's retry: the same event
    assert retry.json()["id"] == first.json()["id"]
    event = _event(Event(pk=first.json()["id"]))
    assert event.processed_at is None
    assert _runs_for(event) == 0

    monkeypatch.undo()  # the broker is back
    reap_expired_leases()
    assert _sent_for(published, event) == 0  # unprocessed for a moment only: may be queued

    _unprocessed_for(event, REDISPATCH_SECONDS + 5)
    reap_expired_leases()
    mine = [(event_id, kwargs) for event_id, kwargs in published if event_id == str(event.id)]
    assert mine == [(str(event.id), {"agency_id": str(agency.id)})]
    # What a worker does with that message: the subscriber starts, once.
    event_id, kwargs = mine[0]
    dispatch_event.apply(args=[event_id], kwargs=kwargs).get()
    assert _event(event).processed_at is not None
    assert _runs_for(event) == 1
    with tenancy.platform_context():
        log = TriggerLog.objects.get(event_id=event.pk)
    assert log.outcome == TriggerOutcome.INVOKED


def test_an_event_sent_again_is_not_sent_again_within_the_period(
    broker_down: None,
    monkeypatch: pytest.MonkeyPatch,
    published: list[tuple[str, dict[str, Any]]],
) -> None:
    event = _emit(_subscribed_agency())
    monkeypatch.undo()
    _unprocessed_for(event, REDISPATCH_SECONDS + 5)
    # Two ticks in one transaction: as if the first tick's message still waited in a queue.
    with transaction.atomic():
        reap_expired_leases()
        reap_expired_leases()
    assert _sent_for(published, event) == 1

    # A period later it is still unprocessed (its message is lost too): sent once more.
    _unprocessed_for(event, REDISPATCH_SECONDS + 5)
    reap_expired_leases()
    assert _sent_for(published, event) == 2

    # A message sent twice starts the subscriber once: dispatch is idempotent.
    for _ in range(2):
        dispatch_event.apply(args=[str(event.id)], kwargs={"agency_id": str(event.agency_id)})
    assert _runs_for(event) == 1


def test_processed_events_and_events_without_subscribers_are_left_alone(
    published: list[tuple[str, dict[str, Any]]],
) -> None:
    agency = _subscribed_agency()
    dispatched = _emit(agency)  # sent after the commit; run here as the worker would
    dispatch_event.apply(args=[str(dispatched.id)], kwargs={"agency_id": str(agency.id)})
    with tenancy.agency_context(agency.id):
        unheard = event_emit(agency_id=agency.id, event_type="crm.note.created")
        recorded_only = event_emit(agency_id=agency.id, event_type=EVENT_TYPE, dispatch=False)
    assert unheard.processed_at is not None
    assert recorded_only.processed_at is not None
    for event in (dispatched, unheard, recorded_only):
        _unprocessed_for(event, REDISPATCH_SECONDS + 5)
    published.clear()
    reap_expired_leases()
    sent = {event_id for event_id, _ in published}
    assert not sent & {str(dispatched.id), str(unheard.id), str(recorded_only.id)}


def test_the_oldest_lost_events_go_first_a_batch_per_tick(
    broker_down: None,
    monkeypatch: pytest.MonkeyPatch,
    published: list[tuple[str, dict[str, Any]]],
) -> None:
    agency = _subscribed_agency()
    events = [_emit(agency) for _ in range(3)]
    monkeypatch.undo()
    # Older than anything else this test session wrote, within a day: events[2], [1], [0].
    for hours_ago, event in zip((6, 12, 18), events, strict=True):
        _unprocessed_for(event, REDISPATCH_SECONDS + 5 + hours_ago * 3600)
    monkeypatch.setattr(tasks, "REAPER_BATCH", 2)
    reap_expired_leases()
    assert [event_id for event_id, _ in published] == [str(events[2].id), str(events[1].id)]

    published.clear()
    reap_expired_leases()  # the two sent are not due again yet; the third one's turn
    assert [event_id for event_id, _ in published] == [str(events[0].id)]


def test_an_event_older_than_the_maximum_age_is_not_dispatched_again(
    broker_down: None,
    monkeypatch: pytest.MonkeyPatch,
    published: list[tuple[str, dict[str, Any]]],
    settings: Settings,
) -> None:
    # E.g. one an older version left unprocessed: an agent subscribed since must not start now.
    settings.AGENTDESK_EVENT_REDISPATCH_MAX_AGE_SECONDS = 86400
    event = _emit(_subscribed_agency())
    monkeypatch.undo()
    _unprocessed_for(event, REDISPATCH_SECONDS + 5, created_days_ago=2)
    reap_expired_leases()
    assert _sent_for(published, event) == 0
