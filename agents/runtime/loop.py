"""The ReAct loop of one execution, run by a Celery task (DESIGN.md, "The runtime").

claim -> context -> [budget -> think (persist the reply) -> act (each tool call, persisted with
its result)]* -> finish. Each model reply and each tool result is one transaction, so a worker
killed at any point loses at most the work in flight: a persisted reply is never requested
again, and a tool whose result is recorded never runs again (the unique idempotency key).

This module is the driver: a delivery's claim, the loop over the run's phases, and the outages
it rides out. The phases are mixins of the run: think.py (the model calls, each reply
persisted), act.py (the tool calls), budget.py (the budget reservation and the provider's own
limits), on the state and primitives of run_base.py (the commit in flight, the cancel flag,
parking, verdicts, the run's end).
"""

from __future__ import annotations

import itertools
import logging
import os
import socket
import threading
import time
import uuid

from django.conf import settings
from django.utils import timezone

from agents.llm import (
    LLMError,
    Message,
    ToolCall,
)
from agents.models import Agent, Execution, ExecutionStatus, StepType, StopReason
from agents.runtime import provider_limits, store
from agents.runtime.act import Acting
from agents.runtime.consult import Consulting
from agents.runtime.context import (
    initial_messages,
    last_calls_failed,
    rebuild_messages,
)
from agents.runtime.context_window import (
    ContextWindow,
    summary_turns,
)
from agents.runtime.faults import crash_point
from agents.runtime.providers import provider_limits_for
from agents.runtime.setup import build_snapshot, pinned_agent
from core import database, tenancy
from core.events import emitted_by_run, event_emit
from core.models import ActorType
from ops import metrics, tracing
from usage.pricing import price_for

logger = logging.getLogger(__name__)

# Outages one delivery rides out (each waited for, then resumed from the last commit).
MAX_OUTAGE_RESUMES = 5


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}"


def run_execution(execution_id: uuid.UUID | str, *, agency_id: uuid.UUID | str) -> str:
    """Run (or resume) one execution until it ends or parks. Returns what happened:
    the final or waiting status, or ``"not_claimed"`` for a duplicate delivery."""
    worker = worker_id()
    claimed_ns = time.time_ns()  # the delivery's span starts with its claim
    with tenancy.agency_context(agency_id):
        claim = store.claim(execution_id, worker=worker)
        if claim is None:
            return "not_claimed"
        execution = claim.execution
        # With its agency and site (one query): switched off after the trigger, the run ends
        # here, before any model call, in the claim's own commit (an approved call it was
        # waiting to run is cancelled with it: a claim's end is not a step of its worker).
        agent = Agent.objects.select_related("agency", "site").get(pk=execution.agent_id)
        switched_off = _switched_off(agent)
        if switched_off:
            when = "started" if claim.first_claim else "resumed"
            claim.tx.finish(
                ExecutionStatus.CANCELLED,
                stop_reason=StopReason.CANCELLED,
                error=f"The {switched_off} before this run {when}.",
            )
            claim.tx.save()
            return ExecutionStatus.CANCELLED
        if claim.first_claim:
            _start(execution, agent, claim.tx)
        else:  # the configuration it started with, whatever was edited since
            agent = pinned_agent(agent, execution)
        claim.tx.save()  # one statement, committed with this block
    if claim.first_claim:
        metrics.run_started(agent, trigger=execution.trigger_type, purpose=execution.purpose)
    run = _Run(execution, agent, worker, first_claim=claim.first_claim)
    # What the run's tools emit comes from the run (the runs it starts are its children); while
    # it runs, whether anyone watches it is kept at hand (streaming.Watchers).
    with (
        emitted_by_run(execution.id, execution.depth, dispatch=not execution.is_evaluation),
        run.watchers,
        metrics.delivery_in_progress(),
        tracing.delivery(execution, agent, first=claim.first_claim, started_ns=claimed_ns) as span,
    ):
        outcome = _run_or_end(run)
        tracing.delivery_ended(span, outcome)
        return outcome


def _run_or_end(run: _Run) -> str:
    execution = run.execution
    try:
        if execution.attempts > settings.AGENTDESK_MAX_DELIVERIES:
            # A run that keeps killing its workers (or keeps losing them) must end somewhere.
            return run.end_with_error(
                f"Gave up after {execution.attempts - 1} deliveries that did not finish the run."
            )
        return _run_through_outages(run)
    except store.LeaseLost:
        logger.warning("execution %s: lease lost, another delivery continues it", execution.id)
        return "lease_lost"
    except database.Unavailable:
        # Still down after the wait: the run keeps its status; once its lease runs out (or its
        # worker's heartbeat stops) the reaper delivers it again, from its last commit.
        logger.error("execution %s: database unavailable, left for the reaper", execution.id)
        return "database_unavailable"
    except Exception as exc:
        # A bug or an unexpected failure: end the run visibly instead of leaving it "running"
        # for the reaper to retry forever. If even that fails (database down), the lease
        # expires and the reaper retries the run later.
        logger.exception("execution %s failed unexpectedly", execution.id)
        run.reload()
        return run.end_with_error(f"Internal error: {type(exc).__name__}: {exc}")


def _run_through_outages(run: _Run) -> str:
    """Run it; when the database connection is lost mid-step (a restart, a failover, a network
    blip), wait for the database and go on from the run's last commit, as a resumed run does:
    a step that was not committed is done again (its model reply requested again, its tool's
    writes rolled back with it), one that was is not. Never a failed run for an outage."""
    for attempt in itertools.count(1):
        try:
            return run.run()
        except Exception as exc:
            if not database.is_transient(exc) or attempt > MAX_OUTAGE_RESUMES:
                raise
            logger.warning(
                "execution %s: database connection lost (%s: %s); waiting to resume",
                run.execution.id,
                type(exc).__name__,
                exc,
            )
            database.wait_until_available()  # raises database.Unavailable past its deadline
            run = run.resumed_after_outage()
    raise AssertionError("unreachable")


def _switched_off(agent: Agent) -> str | None:
    """What was deactivated, for a run that must not go on (agency and site loaded)."""
    if not agent.is_active:
        return "agent was deactivated"
    if not agent.agency.is_active:
        return "agency was suspended"
    if not agent.site.is_active:
        return "agent's site was deactivated"
    return None


def _start(execution: Execution, agent: Agent, tx: store.StepTransaction) -> None:
    """First claim: snapshot the config, observe the trigger, announce the start (same commit)."""
    execution.config_snapshot = dict(build_snapshot(agent, execution))
    tx.changed |= {"config_snapshot", "agent_version_id"}  # the version: build_snapshot's
    tx.add_step(
        StepType.OBSERVE,
        input_text=execution.input or "",
        output_text="",
        tool_input=execution.trigger_data or None,
        started_at=execution.started_at,
        completed_at=timezone.now(),
    )
    with emitted_by_run(execution.id, execution.depth, dispatch=not execution.is_evaluation):
        _emit_started(execution)


def _emit_started(execution: Execution) -> None:
    event_emit(
        agency_id=execution.agency_id,
        site_id=execution.site_id,
        event_type="ai.execution.started",
        payload={
            "execution_id": str(execution.id),
            "agent_id": str(execution.agent_id),
            "trigger_type": execution.trigger_type,
        },
        source_module="agents",
        source_entity_type="execution",
        source_entity_id=str(execution.id),
        actor_type=ActorType.AGENT,
        actor_id=str(execution.agent_id),
    )


class _Run(Consulting, Acting):
    """One delivery of a run: the loop (:meth:`run`) over its phases, think (think.py), the
    plugins' own model calls (consult.py), act (act.py) and budget (budget.py), on the state and
    primitives of run_base.py."""

    # --- the loop ----------------------------------------------------------------------------
    def run(self) -> str:  # noqa: PLR0911, PLR0912 - each return is one way a run ends
        messages, pending, observed = self._conversation()
        self.call_ids.update(c.id for m in messages for c in m.tool_calls)
        for on_start in self.hooks.started:
            on_start()
        try:
            provider = self._provider()
        except LLMError as exc:
            return self._end(ExecutionStatus.FAILED, StopReason.ERROR, error=str(exc))
        limits = provider_limits_for(self.agent, agency_id=self.execution.agency_id)
        if pending:
            # The reply's calls run in order, so the pending ones are its last: their positions
            # in the reply continue after the answered ones (max_tool_calls_per_step counts them).
            reply_calls = next(m.tool_calls for m in reversed(messages) if m.tool_calls)
            first = len(reply_calls) - len(pending)
            outcome = self._act(pending, messages, resumed=True, first=first)
            if outcome is not None:
                return outcome
        messages.extend(observed)  # after every result of the reply they came during
        price = price_for(
            agency_id=self.execution.agency_id,
            provider=self.snapshot["llm_provider"],
            model=self.snapshot["llm_model"],
        )
        while True:
            stop = self._should_stop() or self._out_of_steps()
            if stop is not None:
                return stop
            if self.hooks.before_step:  # a plugin's own model call first (an understanding)
                consulted = self._consult(provider, limits, price, messages)
                if consulted is not None:
                    return consulted
            request = self._fit(provider, limits, price, messages)
            if isinstance(request, str):
                return request
            slot: provider_limits.Slot | None = None
            if limits is not None and limits.any:  # (no estimate to make without limits)
                granted = provider_limits.acquire(
                    limits, tokens=self.window.tokens + self.snapshot["max_tokens"]
                )
                if isinstance(granted, provider_limits.Refusal):
                    return self._defer(granted)
                slot = granted
            refused = self._before_model_call(price, self.window.tokens)
            if refused is not None:
                return self._apply(refused)
            reservation = self._reserve_budget(price, self.window.tokens)
            if reservation is None:
                metrics.budget_refused("model_call")
                return self._end_unless_cancelled(
                    ExecutionStatus.FAILED,
                    StopReason.BUDGET_EXCEEDED,
                    error="The agency's daily budget is exhausted.",
                )
            called = self._call_model(provider, request, reservation)
            if isinstance(called, str):
                return called
            completion, started = called
            crash_point("model_replied")
            completion = self._unique_call_ids(completion)
            reply = completion.to_message()
            # (only a final answer needs them: a list walk back to the last tool-calling reply)
            failures = [] if completion.tool_calls else last_calls_failed(messages)
            ended = self._think(completion, reply, price, reservation, started, failures=failures)
            crash_point("think_committed")
            provider_limits.settle(limits, slot, completion.usage.total_tokens)
            messages.append(reply)
            if ended is not None:
                return ended
            for checked in self.hooks.reply_checked:
                if (verdict := checked(completion.tool_calls, messages)) is not None:
                    return self._apply(verdict)
            outcome = self._act(list(completion.tool_calls), messages)
            if outcome is not None:
                return outcome

    def _out_of_steps(self) -> str | None:
        """The run's end when it reached ``max_steps_per_run`` (the history's summaries and
        the plugins' consults are model calls, not steps)."""
        if (
            self.execution.llm_call_count - self.window.summaries - self.consults
            < self.snapshot["max_steps_per_run"]
        ):
            return None
        return self._end_unless_cancelled(
            ExecutionStatus.FAILED,
            StopReason.MAX_STEPS,
            error=f"Reached max_steps_per_run ({self.snapshot['max_steps_per_run']}) "
            "before a final answer.",
        )

    def _conversation(self) -> tuple[list[Message], list[ToolCall], list[Message]]:
        """The messages so far, the pending calls of the last reply and what was observed
        meanwhile; sets the deadline. timeout_seconds bounds the time the run spends running:
        a run that waited, or whose worker was lost, resumes with what it had left."""
        limit = self.snapshot["timeout_seconds"]
        head = initial_messages(self.snapshot, self.execution)
        self.window = ContextWindow(self.snapshot.get("context_token_budget", 0), head=len(head))
        if self.first_claim:
            self.deadline = (self.execution.started_at or timezone.now()).timestamp() + limit
            return head, [], []
        # A resumed run: rebuild from what was persisted; never repeat a recorded call.
        with tenancy.agency_context(self.execution.agency_id):
            steps = list(self.execution.steps.order_by("step_number"))
            used = store.running_seconds(self.execution, steps)
        self.deadline = time.time() + limit - used
        if self.execution.current_step <= 1:  # lost during its first model call
            return head, [], []
        summaries = [s for s in steps if summary_turns(s.llm_response) is not None]
        self.consults = sum(
            s.step_type == StepType.REFLECT and summary_turns(s.llm_response) is None for s in steps
        )
        if summaries:  # the history's latest summary, and the turns it covers
            turns = summary_turns(summaries[-1].llm_response) or 0
            summary = summaries[-1].output_text
            self.window.restore(summary=summary, turns=turns, summaries=len(summaries))
        resumed = rebuild_messages(self.snapshot, self.execution, steps)
        return resumed.messages, resumed.pending, resumed.observed

    def resumed_after_outage(self) -> _Run:
        """This run as the database has it after a lost connection, to go on from its last
        commit (a commit that may or may not have landed is read back, not guessed). Raises
        :class:`store.LeaseLost` when another delivery took it over meanwhile."""
        try:
            self._settle()
        except Exception:  # the commit in flight died with the connection; the row tells
            logger.info("execution %s: the step in flight is read back", self.execution.id)
        with tenancy.agency_context(self.execution.agency_id):
            self.execution.refresh_from_db()
        if self.execution.lease_owner != self.worker:
            raise store.LeaseLost(self.execution.id)
        resumed = _Run(self.execution, self.agent, self.worker, first_claim=False)
        resumed.watchers = self.watchers  # (entered by run_execution)
        return resumed
