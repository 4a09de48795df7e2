"""What every part of a run shares (agents/runtime/loop.py drives it; think.py, act.py and
budget.py are its phases): the run's state for one delivery, the commit in flight, the cancel
flag, parking, the plugins' verdicts and the run's end."""

from __future__ import annotations

import datetime
import logging
import time

from agents.models import Agent, Execution, ExecutionStatus, StopReason
from agents.runtime import drain, store, streaming
from agents.runtime.context import ConfigSnapshot, tool_definitions
from agents.runtime.context_window import ContextWindow
from agents.runtime.faults import crash_point
from agents.runtime.plugins import Finish, ModelCall, Park, RunView, Verdict, apply_in_step
from agents.runtime.plugins import plugins as run_plugins
from agents.services.cancel import execution_cancel
from core import tenancy
from ops import metrics
from usage.pricing import Price

logger = logging.getLogger("agents.runtime.loop")


class RunBase:
    """One delivery of a run: its state, and what its phases share."""

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

    # --- the commit in flight and the cancel flag ----------------------------------------------
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

    def _parked(self, status: str) -> str:
        """A cancel requested while the park was being written comes back with it: the waiting
        run is cancelled now, as any waiting run is, not when it would next be resumed."""
        if self.execution.cancel_requested_at is None:
            for parked in self.hooks.parked:
                parked(status)
            return status
        with tenancy.agency_context(self.execution.agency_id):
            return str(execution_cancel(execution=self.execution).status)

    def _should_stop(self) -> str | None:
        if self.execution.cancel_requested_at is not None:
            return self._end_cancelled()
        if time.time() >= self.deadline:
            return self._end_unless_cancelled(
                ExecutionStatus.TIMED_OUT,
                StopReason.TIMEOUT,
                error=f"Reached timeout_seconds ({self.snapshot['timeout_seconds']}).",
            )
        if drain.draining():
            return self._hand_back()
        return None

    def _hand_back(self) -> str:
        """The worker is shutting down: the run goes back to pending, its lease released, once
        the step in flight has committed (a reply is never requested twice, a recorded tool
        call never runs again); the delivery's task sends it to its queue again."""
        if self._cancel_requested():  # (settles the step's commit in flight first)
            return self._end_cancelled()
        with store.step_transaction(self.execution, self.worker) as tx:
            tx.hand_back(reason=f"handed back by {self.worker}: its worker is shutting down")
        logger.info("execution %s: handed back (worker shutting down)", self.execution.id)
        return drain.HANDED_BACK

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


def seconds(value: float) -> datetime.timedelta:
    return datetime.timedelta(seconds=value)
