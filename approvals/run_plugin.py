"""Approvals plugged into the runtime (agents/runtime/plugins.py): self-correction (seed 000:
"max 3 attempts then human"): once the same tool has failed ``max_corrections`` times in a run
(since a person last gave a hint about it), the run asks a person (retry with a hint, or stop)
instead of trying on (approvals/questions.py). A call that waits for an approval or an answer
is approvals' tool gate's (approvals/tool_gate.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agents.llm import ToolCall
from agents.runtime.plugins import Park, RunPlugin, RunView, StepWriter
from approvals import questions
from approvals.models import CorrectionChoice, QuestionKind
from core import tenancy

if TYPE_CHECKING:
    from agents.runtime.plugins import Verdict


class ApprovalsPlugin(RunPlugin):
    def __init__(self, run: RunView) -> None:
        super().__init__(run)
        self.limit = run.agent.max_corrections

    def after_tool_step(self, call: ToolCall, *, failed: bool) -> Verdict | None:
        """Only after a failure: a run whose calls succeed makes no query for it."""
        if not failed or not self.limit:
            return None
        run = self.run
        run.settle()
        execution = run.execution
        with tenancy.agency_context(execution.agency_id):
            failures = questions.failures_since_last_help(execution.id, call.name)
        if len(failures) < self.limit:
            return None

        def ask(tx: StepWriter) -> dict[str, Any]:
            question = questions.question_create(
                execution_id=execution.id,
                agency_id=execution.agency_id,
                site_id=execution.site_id,
                agent_id=execution.agent_id,
                kind=QuestionKind.CORRECTION,
                question=questions.correction_question(call.name, failures),
                options=[c.value for c in CorrectionChoice],
                question_type="correction",
                triggered_by=f"{call.name} failed {len(failures)} times",
                context=questions.correction_context(call.name, failures),
            )
            return questions.input_request_for(question)

        return Park(reason=f"{call.name} failed {len(failures)} times: asking a person", write=ask)
