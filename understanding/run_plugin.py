"""The understanding phase plugged into the runtime (agents/runtime/plugins.py): for an agent
with ``understanding_enabled``, before the first model call that may act, the model states its
understanding of the request (understanding/reading.py) in a model call of the plugin's own
(``before_step``'s consult: paid as any, recorded as a ``reflect`` step). Its overall
confidence (understanding/confidence.py) against the agent's ``understanding_threshold`` is the
gate: at or above it the run goes on; below it the run asks a person (understanding/clarify.py)
and waits; the answer resumes it from understanding, with the answer in the request. After
AGENTDESK_UNDERSTANDING_MAX_QUESTIONS questions in a run it goes on with its best
understanding. Other agents' runs do not meet this plugin (``for_run``)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, Self

from django.conf import settings

from agents.llm import Completion, Message
from agents.models import ExecutionStep, StepType
from agents.runtime.plugins import Consult, Consulted, Park, RunPlugin, RunView, StepWriter
from core import tenancy
from understanding import clarify, confidence, reading

MAX_TOKENS = 1000  # the understanding's reply (at most the agent's max_tokens)
PURPOSE = "understanding the request"


def verdicts_so_far(execution_id: uuid.UUID) -> list[str]:
    """The gate's verdicts in a run so far, oldest first. Precondition: agency context."""
    return list(
        ExecutionStep.objects.filter(
            execution_id=execution_id,
            step_type=StepType.REFLECT,
            llm_response__has_key="understanding",
        )
        .order_by("step_number")
        .values_list("llm_response__understanding__verdict", flat=True)
    )


class UnderstandingPlugin(RunPlugin):
    def __init__(self, run: RunView) -> None:
        super().__init__(run)
        self.understood = False  # the gate let the run act (in this delivery or before)
        # Questions the gate asked in this run; None: not read yet (a resumed run's).
        self.asked: int | None = 0 if run.first_claim else None

    @classmethod
    def for_run(cls, run: RunView) -> Self | None:
        return cls(run) if run.agent.understanding_enabled else None

    def before_step(self, messages: Sequence[Message]) -> Consult | None:
        if self.understood:
            return None
        if self.asked is None:  # resumed: an answer, or after the gate let it act
            self.run.settle()
            with tenancy.agency_context(self.run.execution.agency_id):
                verdicts = verdicts_so_far(self.run.execution.id)
            if clarify.PROCEED in verdicts:
                self.understood = True
                return None
            self.asked = len(verdicts)
        execution = self.run.execution
        return Consult(
            purpose=PURPOSE,
            messages=reading.request_messages(
                self.run.snapshot, execution.first_user_message(), messages
            ),
            max_tokens=MAX_TOKENS,
            decide=self._decide,
        )

    def _decide(self, writer: StepWriter, completion: Completion, step_id: uuid.UUID) -> Consulted:
        """The gate, inside the understanding step's transaction."""
        understanding = reading.parse(completion.text)
        scores = understanding.scores()
        weights = confidence.weights()
        score = confidence.overall(scores, weights)
        threshold = float(self.run.agent.understanding_threshold)
        asked = self.asked or 0
        below = score < threshold
        exhausted = below and asked >= settings.AGENTDESK_UNDERSTANDING_MAX_QUESTIONS
        record: dict[str, Any] = {
            **understanding.as_record(),
            "scores": scores,
            "weights": weights,
            "confidence": score,
            "threshold": threshold,
            "verdict": clarify.ASK if below and not exhausted else clarify.PROCEED,
            "questions_asked": asked,
        }
        if exhausted:
            record["questions_exhausted"] = True
        execution = self.run.execution
        text = _in_words(record)
        if record["verdict"] == clarify.PROCEED:
            self.understood = True
            clarify.decided(writer, execution, record, step_id=step_id)
            return Consulted(text, {"understanding": record})
        self.asked = asked + 1

        def ask(tx: StepWriter) -> dict[str, Any]:
            return clarify.ask(tx, execution, understanding, record, step_id=step_id)

        park = Park(reason=f"understanding confidence {score:.2f}: asking a person", write=ask)
        return Consulted(text, {"understanding": record}, park)


def _in_words(record: dict[str, Any]) -> str:
    """The understanding step's text on the run page."""
    verdict = {
        clarify.PROCEED: "acting on it",
        clarify.ASK: "asking a person first",
    }[record["verdict"]]
    if record.get("questions_exhausted"):
        verdict = "acting on it: no questions left to ask in this run"
    summary = record["summary"] or "(no understanding could be read from the model's reply)"
    return (
        f"Understanding (confidence {record['confidence']:.2f}, threshold "
        f"{record['threshold']:.2f}): {summary} Verdict: {verdict}."
    )
