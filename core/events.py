"""The event bus: every platform event and every ``ai.*`` event is a row in the event log, and
agents subscribed to its type are started once the row is committed.

An event with subscribers stays unprocessed (``processed_at`` unset) until ``agents.dispatch_event``
has matched it against them. Its dispatch message is sent after the commit; if that message is
lost (broker down at the send, worker lost before the dispatch committed) beat's reaper sends it
again (``agents.tasks.reap_expired_leases``), so a failed send is logged, never raised.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import re
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from core import fastdb
from core.exceptions import ApplicationError
from core.models import EVENT_TYPE_REGEX, ActorType, Event
from core.sending import send_task

DISPATCH_TASK = "agents.dispatch_event"
_EVENT_TYPE = re.compile(EVENT_TYPE_REGEX)
logger = logging.getLogger(__name__)


# The agent run whose actions this thread's events come from (set by the runtime): its id, its
# depth (how many runs, each started by the previous one's event, led to it) and whether its
# events may start agents.
_emitting_run: contextvars.ContextVar[tuple[uuid.UUID, int, bool] | None] = contextvars.ContextVar(
    "agentdesk_emitting_run", default=None
)


@contextmanager
def emitted_by_run(execution_id: uuid.UUID, depth: int, *, dispatch: bool = True) -> Iterator[None]:
    """Events emitted in the block come from this agent run (``Event.source_execution_id``,
    ``chain_depth`` = ``depth`` + 1). ``dispatch=False`` (a rehearsal: an experiment's run on
    recorded tool replies) records them as processed: they start no agent."""
    token = _emitting_run.set((execution_id, depth, dispatch))
    try:
        yield
    finally:
        _emitting_run.reset(token)


def event_emit(
    *,
    agency_id: uuid.UUID,
    event_type: str,
    payload: dict[str, Any] | None = None,
    site_id: uuid.UUID | None = None,
    source_module: str = "",
    source_entity_type: str = "",
    source_entity_id: str = "",
    actor_type: str = ActorType.SYSTEM,
    actor_user_id: int | None = None,
    actor_id: str = "",
    idempotency_key: str = "",
    dispatch: bool = True,
) -> Event:
    """Record an event and, after commit, dispatch it to subscribed agents.

    Runs in the caller's transaction and tenant (the agency must be the current tenant). With an
    ``idempotency_key`` already used by this agency, returns the existing event and dispatches
    nothing again. ``dispatch=False`` records the event as processed: no agent is started for it,
    now or by the reaper.
    """
    if not _EVENT_TYPE.match(event_type):
        raise ApplicationError(
            "invalid_event_type",
            f"event type {event_type!r} must look like 'module.entity.action' "
            "(lowercase letters, digits and underscores, dot-separated)",
        )
    if idempotency_key:
        existing = Event.objects.filter(agency_id=agency_id, idempotency_key=idempotency_key)
        found = existing.first()
        if found is not None:
            return found
    run = _emitting_run.get()
    subscribed = dispatch and (run is None or run[2]) and _has_subscribers(agency_id, event_type)
    event = Event(
        source_execution_id=run[0] if run else None,
        chain_depth=run[1] + 1 if run else 0,
        agency_id=agency_id,
        site_id=site_id,
        event_type=event_type,
        payload=payload or {},
        source_module=source_module,
        source_entity_type=source_entity_type,
        source_entity_id=source_entity_id,
        actor_type=actor_type,
        actor_user_id=actor_user_id,
        actor_id=actor_id,
        idempotency_key=idempotency_key,
        # Nobody listens (one indexed lookup, in this transaction) or the caller wants no
        # dispatch: the event is processed as written, and the reaper, which dispatches every
        # event left unprocessed, leaves it alone. An agent subscribing later is not started for
        # events from before it subscribed.
        processed_at=None if subscribed else timezone.now(),
    )
    if not idempotency_key:
        fastdb.insert(event)  # nothing to race on: no savepoint, no ORM compilation
    else:
        try:
            with transaction.atomic():
                event.save(force_insert=True)
        except IntegrityError:
            # A concurrent emit with the same key won the race: that event stands.
            found = Event.objects.filter(
                agency_id=agency_id, idempotency_key=idempotency_key
            ).first()
            if found is None:
                raise
            return found
    if dispatch and (run is None or run[2]):
        for listener in event_recorded_listeners():
            listener(event)
    if subscribed:
        # Robust: the event is committed by then, so an error sending its dispatch must not
        # fail the caller (an API client would get a 500 for a recorded event); the reaper
        # dispatches it.
        transaction.on_commit(lambda: send_dispatch(event.id, agency_id), robust=True)
    return event


type EventRecordedListener = Callable[[Event], None]


def event_recorded_listeners() -> tuple[EventRecordedListener, ...]:
    """``AGENTDESK_EVENT_RECORDED_LISTENERS``, loaded once per list: each is called with every
    event recorded (a rehearsal's excepted), in the caller's transaction, after the row is
    written. A listener that acts after the commit registers ``transaction.on_commit`` itself;
    one that queries costs every event that query (outbound webhooks: one statement)."""
    return _load_listeners(tuple(settings.AGENTDESK_EVENT_RECORDED_LISTENERS))


@functools.cache
def _load_listeners(paths: tuple[str, ...]) -> tuple[EventRecordedListener, ...]:
    return tuple(import_string(path) for path in paths)


def subscriptions_for(event_type: str) -> list[str]:
    """The subscriptions an event of ``event_type`` is delivered to: the type itself and each
    wildcard over its leading names (seed 004's ``event:auth.login.*``). ``auth.login.failed``
    -> ``["auth.login.failed", "auth.*", "auth.login.*"]``; a wildcard needs at least one name
    after its prefix, so ``auth.login.*`` does not take ``auth.login``."""
    names = event_type.split(".")
    return [event_type, *(".".join(names[:n]) + ".*" for n in range(1, len(names)))]


def _has_subscribers(agency_id: uuid.UUID, event_type: str) -> bool:
    # Every run emits two events: written out once rather than compiled by the ORM each time.
    # (&& is answered by the GIN index on trigger_events, as @> was.)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT EXISTS (SELECT 1 FROM agents_agent"
            " WHERE agency_id = %s AND trigger_events && %s::varchar(200)[])",
            [agency_id, subscriptions_for(event_type)],
        )
        row = cursor.fetchone()
    return bool(row and row[0])


def send_dispatch(event_id: uuid.UUID, agency_id: uuid.UUID) -> None:
    """Ask a worker to dispatch the event (after its commit, or again from beat's reaper). A
    broker that refuses the message is logged, not raised: the reaper sends it again later."""
    send_task(
        DISPATCH_TASK,
        event_id,
        agency_id=agency_id,
        about=f"event {event_id}",
        then="beat's reaper sends it again once it has been unprocessed for "
        "AGENTDESK_EVENT_REDISPATCH_SECONDS",
    )
