"""A run plugin registered by settings alone (AGENTDESK_RUN_PLUGINS, in a test worker's
environment): it notes each hook it sees, one JSON line per hook, in the file named by
``AGENTDESK_PROBE_LOG``, and returns a verdict when the run's instruction asks for one:
``[probe-park]`` parks the run after its first tool step, ``[probe-finish]`` ends it before
its second model call, ``[probe-cancel]`` requests its cancel while its first tool settles,
``[probe-consult]`` has the kernel make a model call of its own before the first step's and
ends the run with its reply."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Sequence
from typing import Any

from django.utils import timezone

from agents.llm import Completion, Message, ToolCall
from agents.models import Execution, ExecutionStatus, StopReason
from agents.runtime.context import ConfigSnapshot
from agents.runtime.plugins import (
    Consult,
    Consulted,
    Finish,
    ModelCall,
    Park,
    RunPlugin,
    RunSetup,
    StepWriter,
    Verdict,
)
from tools.calls import ToolOutcome

PROBE_KIND = "probe"


def _note(execution: Execution, hook: str, **details: Any) -> None:
    with open(os.environ["AGENTDESK_PROBE_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps({"execution": str(execution.pk), "hook": hook, **details}) + "\n")


def _asks(execution: Execution, what: str) -> bool:
    return f"[probe-{what}]" in (execution.input or "")


class ProbePlugin(RunPlugin):
    model_calls = 0
    consulted = False

    @classmethod
    def setup(cls, setup: RunSetup) -> None:
        _note(setup.execution, "setup", tools=[t["name"] for t in setup.tools])

    @classmethod
    def snapshot(cls, setup: RunSetup, snapshot: ConfigSnapshot) -> None:
        _note(setup.execution, "snapshot")

    def started(self) -> None:
        _note(self.run.execution, "started", first_claim=self.run.first_claim)

    def before_step(self, messages: Sequence[Message]) -> Consult | None:
        _note(self.run.execution, "before_step", messages=len(messages))
        if self.consulted or not _asks(self.run.execution, "consult"):
            return None
        self.consulted = True
        return Consult(
            purpose="probing",
            messages=[Message.system("probe: consult"), Message.user("Is Ada there?")],
            max_tokens=50,
            decide=self._decide,
        )

    def _decide(self, writer: StepWriter, completion: Completion, step_id: uuid.UUID) -> Consulted:
        finish = Finish(ExecutionStatus.FAILED, StopReason.TOOL_FAILURES, error="probe: consulted")
        return Consulted(f"probe: {completion.text}", {"probe": completion.text}, finish)

    def before_model_call(self, call: ModelCall) -> Finish | None:
        _note(self.run.execution, "before_model_call")
        self.model_calls += 1
        if self.model_calls == 2 and _asks(self.run.execution, "finish"):
            return Finish(ExecutionStatus.FAILED, StopReason.TOOL_FAILURES, error="probe: finished")
        return None

    def reply_persisted(
        self, writer: StepWriter, completion: Completion, *, step_id: uuid.UUID
    ) -> None:
        _note(self.run.execution, "reply_persisted")

    def reply_checked(self, calls: Sequence[ToolCall], messages: list[Message]) -> Verdict | None:
        _note(self.run.execution, "reply_checked", calls=[c.name for c in calls])
        return None

    def tool_settled(
        self,
        writer: StepWriter,
        call: ToolCall,
        outcome: ToolOutcome,
        *,
        step_id: uuid.UUID | None,
        resumed: bool,
    ) -> Verdict | None:
        _note(self.run.execution, "tool_settled", tool=call.name)
        if _asks(self.run.execution, "cancel"):  # as a person's cancel lands meanwhile
            Execution.objects.filter(pk=writer.execution.pk).update(
                cancel_requested_at=timezone.now()
            )
        return None

    def tool_result(
        self,
        writer: StepWriter,
        call: ToolCall,
        output: dict[str, Any],
        messages: Sequence[Message],
    ) -> dict[str, Any]:
        _note(self.run.execution, "tool_result", tool=call.name)
        return {**output, "probe": "seen"}

    def after_tool_step(self, call: ToolCall, *, failed: bool) -> Verdict | None:
        _note(self.run.execution, "after_tool_step", tool=call.name)
        if _asks(self.run.execution, "park"):
            return Park(
                reason="probe: a person must look",
                write=lambda writer: {"kind": PROBE_KIND, "tool": call.name},
            )
        return None

    def parked(self, status: str) -> None:
        _note(self.run.execution, "parked", status=status)

    def cancel_reason(self) -> tuple[str, str] | None:
        _note(self.run.execution, "cancel_reason")
        return StopReason.CANCELLED, "probe: cancelled"
