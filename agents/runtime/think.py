"""Think: a run's model calls (the step's, and the history's summaries), each reply persisted
in one transaction before anything acts on it (decision 0003)."""

from __future__ import annotations

import dataclasses
import time
import uuid
from decimal import Decimal
from typing import Any

from django.db import connection
from django.utils import timezone

from agents.llm import (
    Completion,
    LLMDeadlineExceeded,
    LLMError,
    Message,
    Provider,
    get_provider,
)
from agents.llm.types import unique_call_id
from agents.models import ExecutionStatus, ExecutionStep, StepType, StopReason
from agents.runtime import provider_limits, store
from agents.runtime.budget import Budgeting
from agents.runtime.context import think_payload
from agents.runtime.context_window import request_chars, summary_record, summary_request
from agents.runtime.faults import crash_point
from agents.runtime.providers import provider_config_for
from agents.runtime.run_base import seconds
from ops import metrics, tracing
from usage import services as usage_services
from usage.pricing import Price

# A step's model column; a server may name its model at any length (a local file path).
MODEL_NAME_MAX = ExecutionStep._meta.get_field("model").max_length or 100
# Rough size of a token, to estimate a call's input for the budget reservation.
CHARS_PER_TOKEN = 4


@dataclasses.dataclass(frozen=True, slots=True)
class Aside:
    """The reply of a model call besides the step's, not recorded yet."""

    completion: Completion
    cost: Decimal
    reservation: tuple[uuid.UUID, Decimal] | bool
    slot: provider_limits.Slot | None
    started: float  # time.perf_counter() when the call started


def input_tokens(messages: list[Message]) -> int:
    """A call's input in tokens, estimated from its messages (before the provider counts it)."""
    return request_chars(messages) // CHARS_PER_TOKEN


class Thinking(Budgeting):
    """The run's model calls: the step's, and the history's summaries."""

    def _provider(self) -> Provider:
        return get_provider(provider_config_for(self.agent, agency_id=self.execution.agency_id))

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
        aside = self._aside_call(
            provider,
            limits,
            price,
            request,
            max_tokens=min(window.summary_tokens, self.snapshot["max_tokens"]),
            summary=True,
            when="while summarising the run's history",
            failure="Summarising the run's history failed",
        )
        if isinstance(aside, str):
            return aside
        summary = aside.completion.text.strip()[: window.summary_tokens * CHARS_PER_TOKEN]
        with store.step_transaction(self.execution, self.worker) as tx:
            record = summary_record(turns=covered, through_step=self.execution.current_step)
            self._record_aside(tx, aside, output_text=summary, record=record)
        self._aside_settled(limits, aside)
        window.summarised_into(summary, covered)
        return None

    def _aside_call(
        self,
        provider: Provider,
        limits: provider_limits.ProviderLimits | None,
        price: Price,
        request: list[Message],
        *,
        max_tokens: int,
        summary: bool,
        when: str,
        failure: str,
    ) -> Aside | str:
        """A model call besides the step's (a history summary, a plugin's consult), sent
        without tools: within the provider's limits, the plugins' ``before_model_call`` and the
        budget, as a step's. Returns the reply, or the run's status if it ended."""
        slot: provider_limits.Slot | None = None
        if limits is not None and limits.any:
            granted = provider_limits.acquire(limits, tokens=input_tokens(request) + max_tokens)
            if isinstance(granted, provider_limits.Refusal):
                return self._defer(granted)
            slot = granted
        # (the plugins' check counts these too: a delegated run's budget share)
        refused = self._before_model_call(price, input_tokens(request), summary=summary)
        if refused is not None:
            if refused.stop_reason == StopReason.BUDGET_EXCEEDED:
                metrics.budget_refused("model_call")
            return self._apply(refused)
        reservation = self._reserve_budget(price, input_tokens(request))
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
                exc, reservation, when=when, failure=f"{failure}: {exc}"
            )
        return Aside(completion, price.cost(completion.usage), reservation, slot, started)

    def _record_aside(
        self,
        tx: store.StepTransaction,
        aside: Aside,
        *,
        output_text: str,
        record: dict[str, Any],
        step_id: uuid.UUID | None = None,
    ) -> None:
        """The aside call's ``reflect`` step, counted on the run, its budget settled."""
        completion, cost = aside.completion, aside.cost
        now = timezone.now()
        elapsed = time.perf_counter() - aside.started
        tx.add_step(
            StepType.REFLECT,
            step_id=step_id,
            output_text=output_text,
            model=completion.model[:MODEL_NAME_MAX],
            llm_response={
                **record,
                "usage": completion.usage.to_dict(),
                "latency_ms": completion.latency_ms,
            },
            tokens_input=completion.usage.input_tokens,
            tokens_output=completion.usage.output_tokens,
            tokens_cache_read=completion.usage.cache_read_tokens,
            tokens_cache_write=completion.usage.cache_write_tokens,
            cost_usd=cost,
            started_at=now - seconds(elapsed),
            completed_at=now,
            duration_ms=int(elapsed * 1000),
        )
        tx.count_llm_call(completion.usage, cost)
        if isinstance(aside.reservation, tuple):
            usage_services.budget_settle(
                budget_id=aside.reservation[0], reserved=aside.reservation[1], cost=cost
            )
            self.execution.budget_reservation = None
            tx.changed.add("budget_reservation")

    def _aside_settled(self, limits: provider_limits.ProviderLimits | None, aside: Aside) -> None:
        """The aside call's step committed: its tokens on the provider's limits, its metrics."""
        provider_limits.settle(limits, aside.slot, aside.completion.usage.total_tokens)
        self.meter.model_replied(aside.completion, aside.cost)

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
                started_at=now - seconds(time.perf_counter() - started),
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


class _CancelledBeforeRequest(Exception):
    """Raised by _before_request: the run was cancelled while its last tool ran."""


def _release_connection() -> None:
    """Hand the database connection back to the pool while the model answers: a worker with
    hundreds of runs in flight needs connections only for their short writes."""
    if getattr(connection, "pool", None) is not None:
        connection.close()
