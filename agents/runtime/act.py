"""Act: a reply's tool calls, each run through the tool executor and persisted with its result
in one transaction (its idempotency key: a recorded call never runs again)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from django.db import transaction
from django.utils import timezone

from agents.llm import Message, ToolCall
from agents.models import ExecutionStatus, StepType
from agents.runtime import store
from agents.runtime.context import tool_result_message
from agents.runtime.faults import crash_point
from agents.runtime.plugins import Park, Verdict, apply_in_step
from agents.runtime.run_base import RunBase, seconds
from agents.services.resume import schedule_wake
from ops import tracing
from tools.calls import CallRequest, ToolOutcome
from tools.executor import execute_tool_call
from tools.models import ToolCallStatus

# Created with each act step's transaction; the tool handler's writes roll back to it on failure.
TOOL_SAVEPOINT = "agentdesk_tool"


class Acting(RunBase):
    """The run's tool calls."""

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
                        if parked == ExecutionStatus.WAITING_INPUT and not outcome.asked_before:
                            # A person is asked now: the call is made (the run's page shows
                            # it waiting), counted once, not again with the answer.
                            tx.count_tool_call()
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
                    if not outcome.replayed and not outcome.asked_before:
                        tx.count_tool_call()
                now = timezone.now()
                tx.add_step(
                    StepType.ACT,
                    step_id=step_id,
                    tool_name=call.name,
                    tool_call_id=call.id,
                    tool_input=call.arguments,
                    tool_output=output,
                    started_at=now - seconds(time.perf_counter() - started),
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
