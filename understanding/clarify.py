"""The understanding gate's question (seed 000, "Clarification System") and its verdict as a
decision point (seed 003). The question goes to the questions inbox like any other
(approvals.questions): the run waits for it in ``waiting_input``; the answer comes back to the
run as what a person said, and the run understands the request again with it."""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings

from agents.models import DecisionMethod, DecisionPoint, DecisionType, Execution
from agents.runtime.plugins import StepWriter
from approvals import questions
from approvals.models import Question, QuestionKind
from understanding.reading import Ambiguity, Understanding

PROCEED = "proceed"
ASK = "ask"
OPTIONS = [PROCEED, ASK]  # the decision point's available options, in this order
MAX_OPTIONS = 10


def _listed(candidates: tuple[str, ...]) -> str:
    quoted = [f"'{c}'" for c in candidates]
    return ", ".join(quoted[:-1]) + f" or {quoted[-1]}" if len(quoted) > 1 else "".join(quoted)


def _worded(ambiguity: Ambiguity, understanding: Understanding) -> str:
    """The seed's example question of the ambiguity's type, when the model wrote none."""
    entity, candidates = ambiguity.entity or "it", ambiguity.candidates
    if ambiguity.type == "dataset_choice" and candidates:
        return f"Which dataset should I use: {_listed(candidates)}?"
    if ambiguity.type == "column_ambiguity" and candidates:
        return f"By '{entity}', do you mean {_listed(candidates)}?"
    if ambiguity.type == "filter_value":
        return f"Which {entity if ambiguity.entity else 'time period'} should I include?"
    if ambiguity.type == "operation_type" and candidates:
        return f"Should I {_listed(candidates)}?"
    if understanding.summary:
        return f"Before I act: did you mean this? {understanding.summary} If not, what do you mean?"
    return "I am not sure what you are asking me to do. Could you say it another way?"


def question_for(understanding: Understanding) -> tuple[str, str, list[str]]:
    """(question, seed type, options) for the least clear part of the request: the first
    ambiguity with candidates, else the first one, else the understanding as a whole."""
    ranked = sorted(understanding.ambiguities, key=lambda a: not a.candidates)
    ambiguity = ranked[0] if ranked else Ambiguity("missing_info", "", "", ())
    text = ambiguity.question or _worded(ambiguity, understanding)
    return text, ambiguity.type, list(ambiguity.candidates[:MAX_OPTIONS])


def ask(
    writer: StepWriter,
    execution: Execution,
    understanding: Understanding,
    record: dict[str, Any],
    *,
    step_id: uuid.UUID,
) -> dict[str, Any]:
    """Ask the question in the step's transaction (the run parks with it); returns the run's
    input request."""
    text, question_type, options = question_for(understanding)
    asked = questions.question_create(
        execution_id=execution.id,
        agency_id=execution.agency_id,
        site_id=execution.site_id,
        agent_id=execution.agent_id,
        kind=QuestionKind.QUESTION,
        question=text,
        options=options,
        allow_other=True,
        question_type=question_type,
        triggered_by=f"understanding confidence {record['confidence']:.2f} below the agent's "
        f"threshold {record['threshold']:.2f}",
        context={"understanding": record},
    )
    decided(writer, execution, record, step_id=step_id, question=asked)
    return questions.input_request_for(asked)


def decided(
    writer: StepWriter,
    execution: Execution,
    record: dict[str, Any],
    *,
    step_id: uuid.UUID,
    question: Question | None = None,
) -> None:
    """The gate's verdict as a decision point of the understanding's step (unless decision
    points are off: AGENTDESK_FLOW_DECISION_POINTS)."""
    if not settings.AGENTDESK_FLOW_DECISION_POINTS:
        return
    choice = record["verdict"]
    chosen: dict[str, Any] = {"choice": choice, "threshold": record["threshold"]}
    if question is not None:
        chosen |= {"question_id": str(question.id), "question_type": question.question_type}
    if record.get("questions_exhausted"):
        chosen["questions_exhausted"] = True
    scores = ", ".join(f"{name} {value:.2f}" for name, value in record["scores"].items())
    writer.defer_insert(
        DecisionPoint(
            agency_id=execution.agency_id,
            execution_id=execution.id,
            step_id=step_id,
            decision_type=DecisionType.CLARIFICATION,
            decision_question="Is the request understood well enough to act on?",
            available_options=OPTIONS,
            chosen_option=chosen,
            chosen_option_index=OPTIONS.index(choice),
            reasoning=f"Confidence {record['confidence']:.2f} against the threshold "
            f"{record['threshold']:.2f} ({scores}). {record['summary']}"[:4000],
            confidence_score=record["confidence"],
            decision_method=DecisionMethod.CONFIDENCE_THRESHOLD,
        )
    )
