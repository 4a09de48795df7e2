"""Flow analysis plugged into the runtime (agents/runtime/plugins.py): decision points with
each reply and tool call, loop detection (warn, then stop or ask a person), and the reason of a
cancel that stuck detection asked for. The work is flow/runtime.py's and flow/loops.py's."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agents.llm import Completion, Message, ToolCall
from agents.runtime.plugins import RunPlugin, RunView, StepWriter, Verdict
from flow.runtime import RunFlow

if TYPE_CHECKING:
    from tools.calls import ToolOutcome


class FlowPlugin(RunPlugin):
    def __init__(self, run: RunView) -> None:
        super().__init__(run)
        self.flow = RunFlow(run)

    def reply_persisted(
        self, writer: StepWriter, completion: Completion, *, step_id: uuid.UUID
    ) -> None:
        self.flow.replied(writer, completion, step_id=step_id)

    def reply_checked(self, calls: Sequence[ToolCall], messages: list[Message]) -> Verdict | None:
        return self.flow.check_reply(calls, messages)

    def tool_settled(
        self,
        writer: StepWriter,
        call: ToolCall,
        outcome: ToolOutcome,
        *,
        step_id: uuid.UUID | None,
        resumed: bool,
    ) -> Verdict | None:
        self.flow.tool_settled(writer, call, outcome, step_id=step_id, resumed=resumed)
        return None

    def tool_result(
        self,
        writer: StepWriter,
        call: ToolCall,
        output: dict[str, Any],
        messages: Sequence[Message],
    ) -> dict[str, Any]:
        return self.flow.result(writer, call, output, messages)  # with a loop warning

    def after_tool_step(self, call: ToolCall, *, failed: bool) -> Verdict | None:
        return self.flow.looped()  # the same state again (flow/loops.py)

    def cancel_reason(self) -> tuple[str, str] | None:
        return self.flow.cancel_reason()  # "stuck" when stuck detection asked
