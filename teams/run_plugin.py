"""Delegation plugged into the runtime (agents/runtime/plugins.py): a delegated run's tools and
limits narrowed to its parent's, its budget share checked before each model call, and the
delegating run parked while the run it handed work to goes (teams/runtime.py)."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from agents.llm import ToolCall
from agents.models import ExecutionStatus, StopReason
from agents.runtime.plugins import Finish, ModelCall, RunPlugin, RunSetup, RunView, StepWriter
from teams import runtime

if TYPE_CHECKING:
    from agents.runtime.context import ConfigSnapshot
    from agents.runtime.plugins import Verdict
    from tools.calls import ToolOutcome


class TeamsPlugin(RunPlugin):
    @classmethod
    def setup(cls, setup: RunSetup) -> None:
        setup.tools = runtime.narrowed_tools(setup.agent, setup.execution, setup.tools)

    @classmethod
    def snapshot(cls, setup: RunSetup, snapshot: ConfigSnapshot) -> None:
        runtime.narrow(snapshot, setup.execution)  # no more than its parent's limits

    def __init__(self, run: RunView) -> None:
        super().__init__(run)
        self.share = runtime.budget_share(run.snapshot)  # a delegated run's, or None

    def before_model_call(self, call: ModelCall) -> Finish | None:
        if self.share is None:
            return None
        run = self.run
        refused = runtime.over_share(
            self.share, run.execution, run.snapshot, call.price, call.input_tokens
        )
        if refused is None:
            return None
        return Finish(ExecutionStatus.FAILED, StopReason.BUDGET_EXCEEDED, error=refused)

    def tool_settled(
        self,
        writer: StepWriter,
        call: ToolCall,
        outcome: ToolOutcome,
        *,
        step_id: uuid.UUID | None,
        resumed: bool,
    ) -> Verdict | None:
        if outcome.awaiting is None:  # delegate_to_agent: waits for its run's result
            return None
        return runtime.park_verdict(call.name, outcome.awaiting)
