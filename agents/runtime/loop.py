"""The ReAct loop of one execution, run by a Celery task (DESIGN.md, "The runtime").

claim -> context -> [budget -> think (persist the reply) -> act (each tool call, persisted with
its result)]* -> finish. Each model reply and each tool result is one transaction, so a worker
killed at any point loses at most the work in flight: a persisted reply is never requested
again, and a tool whose result is recorded never runs again (the unique idempotency key).
"""

from __future__ import annotations

import dataclasses
import datetime
import itertools
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from agents import lifecycle
from agents.llm import (
    Completion,
    LLMDeadlineExceeded,
    LLMError,
    Message,
    Provider,
    ToolCall,
    get_provider,
)
from agents.llm.types import unique_call_id
from agents.models import Agent, Execution, ExecutionStatus, ExecutionStep, StepType, StopReason
from agents.runtime import provider_limits, store, streaming
from agents.runtime.context import (
    ConfigSnapshot,
    initial_messages,
    last_calls_failed,
    rebuild_messages,
    think_payload,
    tool_definitions,
    tool_result_message,
)
from agents.runtime.context_window import (
    ContextWindow,
    request_chars,
    summary_record,
    summary_request,
    summary_turns,
)
from agents.runtime.faults import crash_point
from agents.runtime.plugins import Finish, ModelCall, Park, RunView, Verdict, apply_in_step
from agents.runtime.plugins import plugins as run_plugins
from agents.runtime.providers import provider_config_for, provider_limits_for
from agents.runtime.setup import build_snapshot, pinned_agent
from agents.services.executions import (
    execution_cancel,
    schedule_wake,
)
from core import database, tenancy
from core.events import emitted_by_run, event_emit
from core.models import ActorType
from ops import metrics, tracing
from tools.calls import CallRequest, ToolOutcome
from tools.executor import execute_tool_call
from tools.models import ToolCallStatus
from usage import services as usage_services
from usage.pricing import Price, price_for

logger = logging.getLogger(__name__)

# Created with each act step's transaction; the tool handler's writes roll back to it on failure.
TOOL_SAVEPOINT = "agentdesk_tool"
# A step's model column; a server may name its model at any length (a local file path).
MODEL_NAME_MAX = ExecutionStep._meta.get_field("model").max_length or 100
# Outages one delivery rides out (each waited for, then resumed from the last commit).
MAX_OUTAGE_RESUMES = 5
# Rough size of a token, to estimate a call's input for the budget reservation.
CHARS_PER_TOKEN = 4


def _input_tokens(messages: list[Message]) -> int:
    """A call's input in tokens, estimated from its messages (before the provider counts it)."""
    return request_chars(messages) // CHARS_PER_TOKEN


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
        metrics.run_started(agent, trigger=execution.trigger_type)
    run = _Run(execution, agent, worker, first_claim=claim.first_claim)
    # What the run's tools emit comes from the run (the runs it starts are its children); while
    # it runs, whether anyone watches it is kept at hand (streaming.Watchers).
    with (
        emitted_by_run(execution.id, execution.depth),
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
    with emitted_by_run(execution.id, execution.depth):
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


class _Run:
    def __init__(
        self, execution: Execution, agent: Agent, worker: str, *, first_claim: bool = True
    ) -> None:
        self.execution = execution
        self.agent = agent
        self.worker = worker
        self.first_claim = first_claim
        self.snapshot: ConfigSnapshot = execution.config_snapshot
        self.tools = {t["name"]: t for t in self.snapshot["tools"]}
        self.tool_definitions = tool_definitions(self.snapshot)
        # When timeout_seconds runs out (time.time()); set by _conversation.
        self.deadline = 0.0
        # Every tool call id of the conversation: ids must be unique within a run (they are the
        # tool calls' idempotency keys), whatever a provider sends (see _unique_call_ids).
        self.call_ids: set[str] = set()
        self.watchers = streaming.Watchers(execution.id)
        # The history each model call sends (agents/runtime/context_window.py); set up by
        # _conversation, which knows where the run's head ends.
        self.window = ContextWindow(0, head=0)
        self.meter = metrics.RunMeter(
            agent=agent, provider=self.snapshot["llm_provider"], model=self.snapshot["llm_model"]
        )
        # The features plugged into the run (agents/runtime/plugins.py), for this delivery.
        self.hooks = run_plugins().for_run(RunView(self))

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
        """The run's end when it reached ``max_steps_per_run`` (the history's summaries are
        model calls, not steps)."""
        if (
            self.execution.llm_call_count - self.window.summaries
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
        if summaries:  # the history's latest summary, and the turns it covers
            turns = summary_turns(summaries[-1].llm_response) or 0
            summary = summaries[-1].output_text
            self.window.restore(summary=summary, turns=turns, summaries=len(summaries))
        resumed = rebuild_messages(self.snapshot, self.execution, steps)
        return resumed.messages, resumed.pending, resumed.observed

    def _fit(
        self,
        provider: Provider,
        limits: provider_limits.ProviderLimits | None,
        price: Price,
        messages: list[Message],
    ) -> list[Message] | str:
        """What the next model call sends (the context window), or the run's status if it
        ended while the history was being summarised."""
        due = self.window.due(messages)
        if due is not None:
            turns, covered = due
            ended = self._summarise(
                provider, limits, price, messages=messages, turns=turns, covered=covered
            )
            if ended is not None:
                return ended
        return self.window.request(messages)

    def _summarise(
        self,
        provider: Provider,
        limits: provider_limits.ProviderLimits | None,
        price: Price,
        *,
        messages: list[Message],
        turns: list[Message],
        covered: int,
    ) -> str | None:
        """Fold ``turns`` (the oldest not yet summarised) into the history's summary: one model
        call, persisted as a ``reflect`` step (its tokens and cost are the run's, its budget
        reserved like a step's) in one transaction. Returns the run's status if it ended."""
        window = self.window
        request = summary_request(
            instruction=messages[window.head - 1].content,
            previous=window.summary,
            turns=turns,
            words=int(window.summary_tokens * 0.6),
        )
        max_tokens = min(window.summary_tokens, self.snapshot["max_tokens"])
        slot: provider_limits.Slot | None = None
        if limits is not None and limits.any:
            granted = provider_limits.acquire(limits, tokens=_input_tokens(request) + max_tokens)
            if isinstance(granted, provider_limits.Refusal):
                return self._defer(granted)
            slot = granted
        # (the plugins' check counts summaries too: a delegated run's budget share)
        refused = self._before_model_call(price, _input_tokens(request), summary=True)
        if refused is not None:
            if refused.stop_reason == StopReason.BUDGET_EXCEEDED:
                metrics.budget_refused("model_call")
            return self._apply(refused)
        reservation = self._reserve_budget(price, _input_tokens(request))
        if reservation is None:
            metrics.budget_refused("model_call")
            return self._end_unless_cancelled(
                ExecutionStatus.FAILED,
                StopReason.BUDGET_EXCEEDED,
                error="The agency's daily budget is exhausted.",
            )
        started = time.perf_counter()
        try:
            self._before_request()
            completion = provider.complete(
                request,
                (),
                model=self.snapshot["llm_model"] or None,
                temperature=self.snapshot["temperature"],
                max_tokens=max_tokens,
                timeout=self.deadline - time.time(),
            )
        except _CancelledBeforeRequest:
            self._release_budget(reservation)
            return self._end_cancelled()
        except LLMError as exc:
            return self._end_after_model_error(
                exc,
                reservation,
                when="while summarising the run's history",
                failure=f"Summarising the run's history failed: {exc}",
            )
        cost = price.cost(completion.usage)
        summary = completion.text.strip()[: window.summary_tokens * CHARS_PER_TOKEN]
        with store.step_transaction(self.execution, self.worker) as tx:
            now = timezone.now()
            tx.add_step(
                StepType.REFLECT,
                output_text=summary,
                model=completion.model[:MODEL_NAME_MAX],
                llm_response={
                    **summary_record(turns=covered, through_step=self.execution.current_step),
                    "usage": completion.usage.to_dict(),
                    "latency_ms": completion.latency_ms,
                },
                tokens_input=completion.usage.input_tokens,
                tokens_output=completion.usage.output_tokens,
                tokens_cache_read=completion.usage.cache_read_tokens,
                tokens_cache_write=completion.usage.cache_write_tokens,
                cost_usd=cost,
                started_at=now - _seconds(time.perf_counter() - started),
                completed_at=now,
                duration_ms=int((time.perf_counter() - started) * 1000),
            )
            tx.count_llm_call(completion.usage, cost)
            if isinstance(reservation, tuple):
                usage_services.budget_settle(
                    budget_id=reservation[0], reserved=reservation[1], cost=cost
                )
                self.execution.budget_reservation = None
                tx.changed.add("budget_reservation")
        provider_limits.settle(limits, slot, completion.usage.total_tokens)
        self.meter.model_replied(completion, cost)
        window.summarised_into(summary, covered)
        return None

    def _call_model(
        self,
        provider: Provider,
        messages: list[Message],
        reservation: tuple[uuid.UUID, Decimal] | bool,
    ) -> tuple[Completion, float] | str:
        """The model's reply and when the call started, or the run's status if it ended."""
        # The last tool result's COMMIT may still be in flight (_act): it is then waited for
        # when the request is built, before it goes out. Otherwise (or if something settled it
        # already) the same checks run now.
        before_send = self._before_request if store.commit_in_flight() else None
        # Watched, the reply's text streams to the watchers as it comes (agents/runtime/
        # streaming.py); the reply is the same, persisted by _think when the call ends.
        tokens = self.watchers.stream(step_number=self.execution.current_step + 1)
        started = time.perf_counter()
        try:
            if before_send is None:
                self._before_request()
            with tracing.model_call(
                provider=self.snapshot["llm_provider"],
                model=self.snapshot["llm_model"],
                max_tokens=self.snapshot["max_tokens"],
                temperature=self.snapshot["temperature"],
            ) as span:
                completion = provider.complete(
                    messages,
                    self.tool_definitions,
                    model=self.snapshot["llm_model"] or None,
                    temperature=self.snapshot["temperature"],
                    max_tokens=self.snapshot["max_tokens"],
                    # The run's time limit holds during the call too (retries included).
                    timeout=self.deadline - time.time(),
                    before_send=before_send,
                    on_text=None if tokens is None else tokens.append,
                )
                tracing.model_replied(span, completion)
        except _CancelledBeforeRequest:
            self._release_budget(reservation)
            return self._end_cancelled()
        except LLMError as exc:
            return self._end_after_model_error(
                exc, reservation, when="during a model call", failure=str(exc)
            )
        self._settle()  # (the hook ran before the request went out: nothing is left)
        return completion, started

    def _end_after_model_error(
        self,
        exc: LLMError,
        reservation: tuple[uuid.UUID, Decimal] | bool,
        *,
        when: str,
        failure: str,
    ) -> str:
        """End the run after a model call failed (the step's or a summary's): counted, its
        budget reservation released; the run's deadline reached is a timeout, else a failure."""
        self.meter.model_failed(exc.code)
        self._release_budget(reservation)
        if isinstance(exc, LLMDeadlineExceeded):
            return self._end_unless_cancelled(
                ExecutionStatus.TIMED_OUT,
                StopReason.TIMEOUT,
                error=f"Reached timeout_seconds ({self.snapshot['timeout_seconds']}) {when}: {exc}",
            )
        return self._end_unless_cancelled(ExecutionStatus.FAILED, StopReason.ERROR, error=failure)

    def _before_request(self) -> None:
        """Run by the provider once the model request is built, before it goes out: the last
        tool result's commit is collected (a failed or fenced-off write is raised as it is),
        and a run cancelled meanwhile (the flag comes back with every step's write) makes no
        model call."""
        if self._cancel_requested():
            raise _CancelledBeforeRequest
        _release_connection()

    def settle(self) -> None:  # (for plugins: agents.runtime.plugins.RunView)
        self._settle()

    def cancel_requested(self) -> bool:
        return self._cancel_requested()

    def _settle(self) -> None:
        """Wait for a tool result's commit still in flight (see _act)."""
        if store.settle_in_flight():
            crash_point("tool_committed")

    def _cancel_requested(self) -> bool:
        """Whether the run was cancelled, as of the last step's write: a tool result's commit
        still in flight brings the flag back with it, so it is collected first."""
        self._settle()
        return self.execution.cancel_requested_at is not None

    def _unique_call_ids(self, completion: Completion) -> Completion:
        """The reply with every tool call id unique in the run. Some OpenAI-compatible servers
        send no ids, or reuse them across turns; the id keys the call's idempotency, so a repeat
        would replay an earlier call's result instead of running the tool."""
        calls = []
        for call in completion.tool_calls:
            call_id = unique_call_id(call.id, self.call_ids)
            calls.append(call if call_id == call.id else dataclasses.replace(call, id=call_id))
        if calls == list(completion.tool_calls):
            return completion
        return dataclasses.replace(completion, tool_calls=tuple(calls))

    def _defer(self, refusal: provider_limits.Refusal) -> str:
        """The provider's own limit is reached: the run waits for the next window without a
        worker instead of failing (woken when it ends: schedule_wake, or beat's timer check)."""
        if self._cancel_requested():
            return self._end_cancelled()
        # At least a second from now: a worker whose clock is behind the one that refused (or
        # a call refused in a minute's last instant) does not come straight back to a full one.
        until = datetime.datetime.fromtimestamp(
            max(refusal.retry_at, time.time() + 1), tz=datetime.UTC
        )
        limit = refusal.describe(self.snapshot["llm_provider"])
        self.meter.rate_limit_parked(refusal.limit)
        with store.step_transaction(self.execution, self.worker) as tx:
            tx.park(
                ExecutionStatus.WAITING_INPUT,
                reason=f"LLM provider rate limit: {limit}",
                wait_until=until,
                input_request={
                    "kind": provider_limits.INPUT_REQUEST_KIND,
                    "limit": refusal.limit,
                    "value": refusal.value,
                    "until": until.isoformat(),
                },
            )
            schedule_wake(self.execution)  # when the window ends, once this commits
        return self._parked(ExecutionStatus.WAITING_INPUT)

    def _parked(self, status: str) -> str:
        """A cancel requested while the park was being written comes back with it: the waiting
        run is cancelled now, as any waiting run is, not when it would next be resumed."""
        if self.execution.cancel_requested_at is None:
            for parked in self.hooks.parked:
                parked(status)
            return status
        with tenancy.agency_context(self.execution.agency_id):
            return str(execution_cancel(execution=self.execution).status)

    def _provider(self) -> Provider:
        return get_provider(provider_config_for(self.agent, agency_id=self.execution.agency_id))

    def _should_stop(self) -> str | None:
        if self.execution.cancel_requested_at is not None:
            return self._end_cancelled()
        if time.time() >= self.deadline:
            return self._end_unless_cancelled(
                ExecutionStatus.TIMED_OUT,
                StopReason.TIMEOUT,
                error=f"Reached timeout_seconds ({self.snapshot['timeout_seconds']}).",
            )
        return None

    # --- think --------------------------------------------------------------------------------
    def _think(
        self,
        completion: Completion,
        reply: Message,
        price: Price,
        reservation: tuple[uuid.UUID, Decimal] | bool,
        started: float,
        *,
        failures: list[dict[str, Any]],
    ) -> str | None:
        """Persist the model's reply; returns the run's final status when it was the last.
        ``failures``: the failed calls of the reply before a final answer."""
        cost = price.cost(completion.usage)
        final = not completion.tool_calls
        # A reply that only adds rows (no final answer to finish, no budget to settle) is
        # written in one round trip; the others need the database inside their transaction.
        budgeted = isinstance(reservation, tuple)
        write = store.step_transaction if final or budgeted else store.direct_step
        with write(self.execution, self.worker) as tx:
            now = timezone.now()
            step_id = uuid.uuid4()
            for persisted in self.hooks.reply_persisted:
                persisted(tx, completion, step_id=step_id)
            tx.add_step(
                StepType.THINK,
                step_id=step_id,
                reasoning=completion.text if not final else "",
                output_text=completion.text if final else "",
                model=completion.model[:MODEL_NAME_MAX],
                llm_response=think_payload(
                    reply,
                    stop_reason=completion.stop_reason,
                    usage=completion.usage.to_dict(),
                    latency_ms=completion.latency_ms,
                    attempts=completion.attempts,
                ),
                tokens_input=completion.usage.input_tokens,
                tokens_output=completion.usage.output_tokens,
                tokens_cache_read=completion.usage.cache_read_tokens,
                tokens_cache_write=completion.usage.cache_write_tokens,
                cost_usd=cost,
                started_at=now - _seconds(time.perf_counter() - started),
                completed_at=now,
                duration_ms=int((time.perf_counter() - started) * 1000),
            )
            tx.count_llm_call(completion.usage, cost)
            if isinstance(reservation, tuple):  # i.e. budgeted; spelled out for mypy
                usage_services.budget_settle(
                    budget_id=reservation[0], reserved=reservation[1], cost=cost
                )
                self.execution.budget_reservation = None
                tx.changed.add("budget_reservation")
            if final and completion.stop_reason == "max_tokens":
                # A final answer cut off mid-way is not an answer: kept as the output, but the
                # run says what happened instead of passing it off as complete.
                tx.finish(
                    ExecutionStatus.FAILED,
                    stop_reason=StopReason.ERROR,
                    output=completion.text,
                    error=f"The model's answer was cut off by the max_tokens limit "
                    f"({self.snapshot['max_tokens']}); the partial answer is the output. "
                    "Raise the agent's max_tokens.",
                )
            elif final:
                tx.finish(
                    ExecutionStatus.COMPLETED,
                    stop_reason=StopReason.FINAL_ANSWER,
                    output=completion.text,
                )
                if failures:  # answered, but after tool calls that failed: say so
                    self.execution.result = {
                        **(self.execution.result or {}),
                        "last_tool_calls_failed": failures,
                    }
                    tx.changed.add("result")
            crash_point("think_uncommitted")
        self.meter.model_replied(completion, cost)
        self.meter.think_step(time.perf_counter() - started)
        return self.execution.status if final else None

    # --- act ----------------------------------------------------------------------------------
    def _act(  # noqa: PLR0912, PLR0915 - a branch per way a call settles (runs, waits, parks)
        self,
        calls: list[ToolCall],
        messages: list[Message],
        *,
        resumed: bool = False,
        first: int = 0,
    ) -> str | None:
        """Run the reply's tool calls in order (``first``: the position of ``calls[0]`` in the
        reply); returns a status when the run parks or ends."""
        limit = self.snapshot["max_tool_calls_per_step"]
        parked: str | None = None  # set (and the loop left) when a call parks the run
        finished: str | None = None  # set (and the loop left) when a plugin ends the run
        for index, call in enumerate(calls, start=first):
            failed = False  # the call ran and failed (what self-correction counts)
            stop = self._should_stop()
            if stop is not None:
                return stop
            step_id = uuid.uuid4()
            # The reply's last result is followed by a model call (unless it ends or parks the
            # run): its COMMIT is left in flight while the request is built. A resumed run
            # reads the database before its first model call, so it commits as usual.
            with store.step_transaction(
                self.execution,
                self.worker,
                savepoint=TOOL_SAVEPOINT,
                commit_later=not resumed and index == first + len(calls) - 1,
            ) as tx:
                started = time.perf_counter()
                if index >= limit:
                    output = {
                        "error": {
                            "code": "max_tool_calls",
                            "message": f"Only {limit} tool calls are allowed per step; "
                            "this one was not run. Call it again in your next step if needed.",
                        }
                    }
                    park_until = None
                else:
                    request = self._request(call, resumed, insert=tx.defer_row)
                    with tracing.tool_call(name=call.name, call_id=call.id) as span:
                        outcome = execute_tool_call(request, step_id=step_id)
                        tracing.tool_settled(span, status=outcome.status, output=outcome.output)
                    verdict = self._tool_settled(tx, call, outcome, step_id, resumed)
                    if verdict is not None:  # its step is not written: it runs on resume
                        status = apply_in_step(tx, verdict)
                        if isinstance(verdict, Park):
                            parked = status
                        else:
                            finished = status
                        break
                    if (held := outcome.held) is not None:  # a tool gate holds the call
                        # (waiting_approval or waiting_input: the run's status of that name)
                        parked = ExecutionStatus(outcome.status)
                        given = held.input_request
                        tx.park(
                            parked,
                            reason=held.reason,
                            input_request=dict(given) if given is not None else None,
                        )
                        break  # leaves the with block (it commits) and the loop
                    if outcome.ask is not None or outcome.awaiting is not None:
                        # (ask_user: approvals' tool gate holds it; delegate_to_agent: teams'
                        # run plugin parks)
                        raise RuntimeError(
                            f"{call.name} waits for a person or another run, and no tool gate "
                            "or run plugin parks the run for it (AGENTDESK_TOOL_GATES, "
                            "AGENTDESK_RUN_PLUGINS)"
                        )
                    output, park_until = outcome.output, outcome.park_until
                    for shown in self.hooks.tool_result:
                        output = shown(tx, call, output, messages)
                    failed = outcome.status == ToolCallStatus.FAILED and not outcome.replayed
                    for callback in outcome.after_commit:
                        transaction.on_commit(callback)
                    if not outcome.replayed:
                        tx.count_tool_call()
                now = timezone.now()
                tx.add_step(
                    StepType.ACT,
                    step_id=step_id,
                    tool_name=call.name,
                    tool_call_id=call.id,
                    tool_input=call.arguments,
                    tool_output=output,
                    started_at=now - _seconds(time.perf_counter() - started),
                    completed_at=now,
                    duration_ms=int((time.perf_counter() - started) * 1000),
                )
                if park_until is not None:
                    tx.park(
                        ExecutionStatus.WAITING_INPUT,
                        reason=f"waiting until {park_until.isoformat()}",
                        wait_until=park_until,
                        input_request={"kind": "timer", "until": park_until.isoformat()},
                    )
                    schedule_wake(self.execution)  # at its time, once this commits
                crash_point("tool_uncommitted")
            crash_point("tool_commit_sent" if tx.commit_sent else "tool_committed")
            self.meter.act_step(time.perf_counter() - started)
            messages.append(tool_result_message(call.id, output))
            if park_until is not None:
                return self._parked(ExecutionStatus.WAITING_INPUT)
            for after in self.hooks.after_tool_step:
                if (verdict := after(call, failed=failed)) is not None:
                    return self._apply(verdict)
        if finished is not None:  # a plugin ended the run with the call's transaction
            return finished
        if parked is not None:  # the call parked the run; its transaction committed
            return self._parked(parked)
        return None

    def _tool_settled(
        self,
        tx: store.StepTransaction,
        call: ToolCall,
        outcome: ToolOutcome,
        step_id: uuid.UUID,
        resumed: bool,
    ) -> Verdict | None:
        for settled in self.hooks.tool_settled:
            verdict = settled(tx, call, outcome, step_id=step_id, resumed=resumed)
            if verdict is not None:
                return verdict
        return None

    def _before_model_call(
        self, price: Price, input_tokens: int, summary: bool = False
    ) -> Finish | None:
        if not self.hooks.before_model_call:
            return None
        call = ModelCall(price=price, input_tokens=input_tokens, summary=summary)
        for before in self.hooks.before_model_call:
            if (verdict := before(call)) is not None:
                return verdict
        return None

    def _apply(self, verdict: Verdict) -> str:
        """A plugin's verdict, recorded in a transaction of its own; a run whose cancel came
        first is cancelled instead."""
        if self._cancel_requested():
            return self._end_cancelled()
        with store.step_transaction(self.execution, self.worker) as tx:
            status = apply_in_step(tx, verdict)
        return self._parked(status) if isinstance(verdict, Park) else status

    def _request(
        self, call: ToolCall, resumed: bool, *, insert: Callable[[Any], None]
    ) -> CallRequest:
        return CallRequest(
            agency_id=self.execution.agency_id,
            site_id=self.execution.site_id,
            agent_id=self.execution.agent_id,
            execution_id=self.execution.id,
            call=call,
            tools=self.tools,
            constraints=list(self.agent.constraints or []),
            triggered_by_user_id=self.execution.triggered_by_id,
            may_have_run=resumed,
            insert=insert,
            savepoint=TOOL_SAVEPOINT,
        )

    # --- budget and end -------------------------------------------------------------------------
    def _reserve_budget(
        self, price: Price, input_tokens: int
    ) -> tuple[uuid.UUID, Decimal] | bool | None:
        """``True`` with no budget configured, ``(budget id, amount)`` when reserved, ``None``
        when the step's maximum cost does not fit. A reservation is its own small commit."""
        if usage_services.known_without_budget(self.execution.agency_id):
            return True  # no query, no transaction: the common case stays off the hot path
        self._settle()
        amount = price.max_cost(
            input_tokens=input_tokens, max_output_tokens=self.snapshot["max_tokens"]
        )
        if amount <= 0:
            amount = Decimal(0)
        with tenancy.agency_context(self.execution.agency_id):
            fits, budget_id = usage_services.budget_reserve(
                agency_id=self.execution.agency_id, amount=amount
            )
            if fits and budget_id is not None:  # on the run's row, to release if we are lost
                store.record_budget_reservation(
                    self.execution, self.worker, budget_id=budget_id, amount=amount
                )
        if not fits:
            return None
        return (budget_id, amount) if budget_id is not None else True

    def _release_budget(self, reservation: tuple[uuid.UUID, Decimal] | bool) -> None:
        if isinstance(reservation, tuple):
            self._settle()
            with tenancy.agency_context(self.execution.agency_id):
                lifecycle.release_budget_reservation(self.execution, holder=self.worker)

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

    def reload(self) -> None:
        """The execution as committed. A step whose transaction failed had already changed the
        object (its status, counters, step number: a final answer had set it completed), and
        the run must end from what the database holds, not from what was rolled back."""
        try:
            self._settle()
        except Exception:
            logger.exception("execution %s: a step's commit failed", self.execution.id)
        with tenancy.agency_context(self.execution.agency_id):
            self.execution.refresh_from_db()

    def end_with_error(self, error: str) -> str:
        return self._end(ExecutionStatus.FAILED, StopReason.ERROR, error=error[:4000])

    def _end_unless_cancelled(self, status: str, stop_reason: str, *, error: str) -> str:
        """End the run so, or cancelled if a cancel came first: the last tool result's write,
        whose commit may still be in flight, brings the cancel flag back with it."""
        if self._cancel_requested():
            return self._end_cancelled()
        return self._end(status, stop_reason, error=error)

    def _end_cancelled(self) -> str:
        stop_reason: str = StopReason.CANCELLED
        error = "Cancelled on request."
        for reason in self.hooks.cancel_reason:
            if (given := reason()) is not None:
                stop_reason, error = given
                break
        return self._end(ExecutionStatus.CANCELLED, stop_reason, error=error)

    def _end(self, status: str, stop_reason: str, *, error: str = "") -> str:
        self._settle()
        with store.step_transaction(self.execution, self.worker) as tx:
            tx.finish(status, stop_reason=stop_reason, error=error)
        return status


class _CancelledBeforeRequest(Exception):
    """Raised by _before_request: the run was cancelled while its last tool ran."""


def _release_connection() -> None:
    """Hand the database connection back to the pool while the model answers: a worker with
    hundreds of runs in flight needs connections only for their short writes."""
    if getattr(connection, "pool", None) is not None:
        connection.close()


def _seconds(value: float) -> datetime.timedelta:
    return datetime.timedelta(seconds=value)
