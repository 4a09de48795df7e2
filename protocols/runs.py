"""Runs for callers from other systems (an MCP tool call, an A2A task): which agents a key may
run, starting a run the way the API's ``execute`` does, and waiting a bounded time for it.

The caller has authenticated an API key (:func:`core.api.authentication.api_key_authenticate`)
and acts in the key's agency with the key's role. The sync functions here need that agency's
context (``tenancy.agency_context``); async code (the ASGI endpoints) calls them through
:func:`in_agency`, which runs one unit of database work in a worker thread, in the agency's
transaction, and gives the connection back to the pool afterwards.

A run is *settled* for the caller when it ended (completed, failed, cancelled, timed out) or
waits for a person (an approval, an answer): waiting longer would not help. A run waiting for a
delegated agent (``waiting_agent``) or parked on a clock (the ``wait`` tool, a provider's rate
limit: ``waiting_input`` with such an ``input_request`` kind) is still in progress.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.db import connections, transaction

from agents.inputs import input_error
from agents.models import (
    INPUT_MAX_CHARS,
    TERMINAL_STATUSES,
    Agent,
    Execution,
    ExecutionStatus,
    TriggerType,
)
from agents.services import execution_create, skipped_trigger
from core import realtime, tenancy
from core.models import Role

# The roles that may start runs: the API's ``POST /agents/{id}/execute/`` needs a writing role
# (core.api.permissions.WRITE_ROLES); a viewer's or approver's key gets no agents to run.
RUN_ROLES: frozenset[str] = frozenset({Role.ADMIN, Role.STAFF})
WAITING_FOR_A_PERSON: frozenset[str] = frozenset(
    {ExecutionStatus.WAITING_APPROVAL, ExecutionStatus.WAITING_INPUT}
)
# A run parked on a clock (the `wait` tool, a provider's rate limit) waits for no person.
TIMER_KINDS: frozenset[str] = frozenset({"timer", "provider_rate_limit"})
_POLL_FIRST_S = 0.05  # the first look after a start; each next one waits 1.5 times longer...
_POLL_MAX_S = 0.5  # ...up to this
_WAKE_FALLBACK_S = 2.0  # an async wait told of changes looks anyway this often (a lost event)
logger = logging.getLogger(__name__)


class RunNotStarted(Exception):
    """The run was not started; ``code`` (a trigger skip reason, or ``invalid_input``) and
    ``message`` are written for the caller."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class ExposedAgent:
    """An agent a key may run, under the name other systems call it by: its slug, unique in
    the agency (two agents of different sites with one slug: ``<slug>-<8 hex of its id>``)."""

    name: str
    agent: Agent

    @property
    def description(self) -> str:
        agent = self.agent
        return agent.description.strip() or f"Run the AgentDesk agent {agent.name!r}."


@dataclass(frozen=True)
class RunOutcome:
    """Where a run stands, as a caller outside sees it."""

    execution_id: uuid.UUID
    agent_id: uuid.UUID
    status: str
    stop_reason: str = ""
    output: str = ""
    result: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    input_request: dict[str, Any] = field(default_factory=dict)  # what a waiting run asks

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL_STATUSES

    @property
    def waiting_for_a_person(self) -> bool:
        on_a_clock = self.input_request.get("kind") in TIMER_KINDS
        return self.status in WAITING_FOR_A_PERSON and not on_a_clock

    @property
    def settled(self) -> bool:
        return self.finished or self.waiting_for_a_person


_OUTCOME_FIELDS = (
    "id",
    "agent_id",
    "status",
    "stop_reason",
    "output",
    "result",
    "error",
    "input_request",
)


def _outcome(row: dict[str, Any]) -> RunOutcome:
    return RunOutcome(
        execution_id=row["id"],
        agent_id=row["agent_id"],
        status=row["status"],
        stop_reason=row["stop_reason"],
        output=row["output"],
        result=row["result"] or {},
        error=row["error"],
        input_request=row["input_request"] or {},
    )


def may_run(role: str | None) -> bool:
    return role in RUN_ROLES


def exposed_agents(*, role: str | None) -> list[ExposedAgent]:
    """The agency's agents that ``role`` may run (active ones), by name. Precondition: in the
    agency's context (row-level security shows no other agency's agents)."""
    if not may_run(role):
        return []
    agents = list(Agent.objects.filter(is_active=True).order_by("slug", "created_at", "id"))
    counts: dict[str, int] = {}
    for agent in agents:
        counts[agent.slug] = counts.get(agent.slug, 0) + 1
    return [
        ExposedAgent(
            name=agent.slug if counts[agent.slug] == 1 else f"{agent.slug}-{agent.id.hex[:8]}",
            agent=agent,
        )
        for agent in agents
    ]


def exposed_agent(*, role: str | None, name: str) -> ExposedAgent | None:
    """The agent ``role`` may run under ``name``; ``None`` alike for a made-up name, another
    agency's agent, an inactive one, or a role that runs none. Precondition: agency context."""
    return next((e for e in exposed_agents(role=role) if e.name == name), None)


def run_start(
    *,
    agent: Agent,
    input: str,
    data: dict[str, Any] | None = None,
    via: str,
    platform_data: dict[str, Any] | None = None,
) -> RunOutcome:
    """Start a manual run of ``agent`` with ``input`` (its instruction) and ``data`` (its trigger
    data, checked against the agent's declared inputs, :mod:`agents.inputs`), as the API's
    ``execute`` does; ``via`` (``"mcp"``, ``"a2a"``) is kept in the trigger data as ``_via``,
    beside ``platform_data`` (``_`` names, not the caller's). Raises :class:`RunNotStarted` for
    invalid input or data or a skipped start (the agent inactive or over its run limits: the
    skip is logged). Precondition: agency context; the run is delivered to a worker when that
    transaction commits."""
    if not isinstance(input, str):
        raise RunNotStarted("invalid_input", "The input must be a string.")
    if len(input) > INPUT_MAX_CHARS:
        raise RunNotStarted(
            "invalid_input", f"The input is longer than {INPUT_MAX_CHARS} characters."
        )
    if data is not None and not isinstance(data, dict):
        raise RunNotStarted("invalid_input", "The data must be an object.")
    problem = input_error(agent.input_schema, data or {})
    if problem is not None:
        raise RunNotStarted(
            "invalid_input", f"The data does not match the agent's inputs: {problem}"
        )
    with transaction.atomic():
        execution = execution_create(
            agent=agent,
            trigger_type=TriggerType.MANUAL,
            input=input,
            trigger_data={**(data or {}), **(platform_data or {}), "_via": via},
        )
    if execution is None:
        log = skipped_trigger(agent)
        code = log.skip_reason if log else "skipped"
        detail = log.skip_detail if log else "the run was not started"
        raise RunNotStarted(code, f"Not started: {detail}.")
    return RunOutcome(execution_id=execution.id, agent_id=agent.id, status=execution.status)


def run_outcome(*, execution_id: uuid.UUID | str) -> RunOutcome | None:
    """The run's outcome; ``None`` alike for a malformed id, a made-up one and another agency's
    run. Precondition: agency context."""
    try:
        pk = uuid.UUID(str(execution_id))
    except ValueError:
        return None
    row = Execution.objects.filter(pk=pk).values(*_OUTCOME_FIELDS).first()
    return _outcome(row) if row is not None else None


def wait_seconds(requested: float | None, *, limit: float) -> float:
    """How long to wait: what the caller asked for (``None``: the limit), never above ``limit``
    nor below 0."""
    if requested is None:
        return max(0.0, limit)
    return max(0.0, min(float(requested), limit))


def _in_agency_sync[T](agency_id: uuid.UUID, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    try:
        with tenancy.agency_context(agency_id):
            return fn(*args, **kwargs)
    finally:
        # A worker thread of the executor: give its pooled connection back now, not never.
        connections.close_all()


async def in_agency[T](agency_id: uuid.UUID, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run ``fn(*args, **kwargs)`` in the agency's context (one transaction, committed when it
    returns) in a worker thread; for async callers."""
    return await sync_to_async(_in_agency_sync, thread_sensitive=False)(
        agency_id, fn, *args, **kwargs
    )


def run_wait(
    *, agency_id: uuid.UUID, execution_id: uuid.UUID, timeout_s: float
) -> RunOutcome | None:
    """Look at the run until it is settled or ``timeout_s`` passed; its last outcome (``None``:
    no such run in the agency). Each look is a short transaction of its own: call this outside
    any (the run's start must have committed, or no worker sees it)."""
    deadline = time.monotonic() + timeout_s
    pause = _POLL_FIRST_S
    while True:
        with tenancy.agency_context(agency_id):
            outcome = run_outcome(execution_id=execution_id)
        left = deadline - time.monotonic()
        if outcome is None or outcome.settled or left <= 0:
            return outcome
        time.sleep(min(pause, left))
        pause = min(pause * 1.5, _POLL_MAX_S)


async def run_wait_async(
    *, agency_id: uuid.UUID, execution_id: uuid.UUID, timeout_s: float
) -> RunOutcome | None:
    """:func:`run_wait` for async callers: the looks in worker threads, no thread held while
    waiting. Between looks it listens to the agency's live events (the status changes the
    lifecycle broadcasts after each commit, :mod:`agents.lifecycle.broadcasting`) and looks again
    when this run's status changed, else every ``_WAKE_FALLBACK_S`` in case an event was lost;
    without the channel layer (Redis unreachable) it polls as :func:`run_wait` does. The
    agency's group, not the run's: a listener there would make the runtime stream the run's
    tokens to nobody."""
    deadline = time.monotonic() + timeout_s
    pause = _POLL_FIRST_S
    async with _status_changes(agency_id, execution_id) as changed:
        while True:
            if changed is not None:
                changed.clear()  # before the look: a change after it wakes the wait below
            outcome = await in_agency(agency_id, run_outcome, execution_id=execution_id)
            left = deadline - time.monotonic()
            if outcome is None or outcome.settled or left <= 0:
                return outcome
            if changed is None:
                await asyncio.sleep(min(pause, left))
                pause = min(pause * 1.5, _POLL_MAX_S)
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), min(_WAKE_FALLBACK_S, left))


@contextlib.asynccontextmanager
async def _status_changes(
    agency_id: uuid.UUID, execution_id: uuid.UUID
) -> AsyncIterator[asyncio.Event | None]:
    """An event set whenever the run's status changes (``None``: no channel layer to listen
    to), for the block's duration."""
    layer = get_channel_layer()
    group = realtime.agency_group(agency_id)
    try:
        if layer is None:
            raise RuntimeError("no channel layer")
        channel = await layer.new_channel()
        await layer.group_add(group, channel)
    except Exception as exc:  # Redis down: poll instead (the run goes on regardless)
        logger.warning("waiting for run %s by polling: %s", execution_id, exc)
        yield None
        return
    changed = asyncio.Event()
    wanted = str(execution_id)

    async def listen() -> None:
        while True:
            message = await layer.receive(channel)
            if message.get("execution_id") == wanted and message.get("kind") == "status":
                changed.set()

    listening = asyncio.ensure_future(listen())
    try:
        yield changed
    finally:
        listening.cancel()
        with contextlib.suppress(Exception):
            await layer.group_discard(group, channel)
