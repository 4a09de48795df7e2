"""Questions to a person (seed 000's clarifications and "correction attempts exhausted: pause,
show error, ask for help"): asked, answered, expired.

Two kinds. A ``question`` is the agent's ``ask_user`` call: its tool call waits with the run,
and the answer becomes that call's result (tools.executor reads it when the run resumes); one
of no tool call (the understanding phase's clarification) comes back as what the person said,
an observation the run resumes with. A
``correction`` is asked by the runtime when one tool failed ``max_corrections`` times in a run:
the answer is a hint the run resumes with, or "stop", which ends it.

Writers lock the run's row before the question's, as every writer of a waiting run does
(approvals.services).
"""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from agents import lifecycle
from agents.models import Agent, Execution, ExecutionStatus, StopReason
from agents.services import execution_resume
from approvals import notify, question_types
from approvals.models import CorrectionChoice, Question, QuestionKind, QuestionStatus
from approvals.waiting import end_waiting_run, lock_with_run
from core.events import event_emit
from core.exceptions import ApplicationError
from core.models import ActorType
from ops import metrics
from tools.models import ToolCall, ToolCallStatus

ANSWER_MAX_CHARS = 4000
INPUT_REQUEST_KIND = "question"  # Execution.input_request["kind"] of a run waiting for one


def question_create(
    *,
    execution_id: uuid.UUID,
    agency_id: uuid.UUID,
    site_id: uuid.UUID,
    agent_id: uuid.UUID,
    kind: str,
    question: str,
    options: list[str] | None = None,
    allow_other: bool = True,
    question_type: str = "",
    triggered_by: str = "",
    context: dict[str, Any] | None = None,
    tool_call: ToolCall | None = None,
) -> Question:
    """Record a question the run now waits on (in the run's transaction, which parks it), the
    ``ai.question.asked`` event, and the deciders' notifications once it commits."""
    minutes = Agent.objects.values_list("human_timeout_minutes", flat=True).get(pk=agent_id)
    asked = Question.objects.create(
        agency_id=agency_id,
        execution_id=execution_id,
        agent_id=agent_id,
        site_id=site_id,
        tool_call=tool_call,
        kind=kind,
        question=question,
        options=options or [],
        allow_other=allow_other or not options,
        question_type=question_type,
        triggered_by=triggered_by,
        context=context or {},
        expires_at=timezone.now() + datetime.timedelta(minutes=minutes),
    )
    _emit(asked, "ai.question.asked", user_id=None)
    metrics.question_asked(kind)
    notify.question_asked_on_commit(asked)
    return asked


def input_request_for(question: Question) -> dict[str, Any]:
    """What the waiting run's ``input_request`` says (the staff home lists these)."""
    return {
        "kind": INPUT_REQUEST_KIND,
        "question_id": str(question.id),
        "question": question.question,
        "options": question.options,
        "correction": question.kind == QuestionKind.CORRECTION,
    }


# --- self-correction ----------------------------------------------------------------------------
def failures_since_last_help(execution_id: uuid.UUID, tool_name: str) -> list[ToolCall]:
    """The failed calls of ``tool_name`` in the run since a person last answered a correction
    about it (a hint starts the count again), oldest first."""
    since = Question.objects.filter(
        execution_id=execution_id,
        kind=QuestionKind.CORRECTION,
        context__tool=tool_name,
        status=QuestionStatus.ANSWERED,
    ).aggregate(at=Max("response_timestamp"))["at"]
    calls = ToolCall.objects.filter(
        execution_id=execution_id, tool_name=tool_name, status=ToolCallStatus.FAILED
    )
    if since is not None:
        calls = calls.filter(created_at__gt=since)
    return list(calls.order_by("created_at"))


def correction_context(tool_name: str, failures: list[ToolCall]) -> dict[str, Any]:
    return {
        "tool": tool_name,
        "failures": [
            {
                "arguments": call.input,
                "error_code": call.error_code,
                "error": call.error[:1000],
                "at": call.created_at.isoformat(),
            }
            for call in failures
        ],
    }


def correction_question(tool_name: str, failures: list[ToolCall]) -> str:
    last = failures[-1].error if failures else ""
    return (
        f"The tool {tool_name} failed {len(failures)} times in this run"
        + (f"; last error: {last[:300]}" if last else "")
        + ". Retry with a hint, or stop the run?"
    )


# --- answer and expiry ----------------------------------------------------------------------------
def _check_answer(question: Question, answer: str) -> None:
    if not answer:
        raise ApplicationError("answer_required", "Write an answer (or stop the run).")
    if len(answer) > ANSWER_MAX_CHARS:
        raise ApplicationError("answer_too_long", f"At most {ANSWER_MAX_CHARS} characters.")
    if question.options and not question.allow_other and answer not in question.options:
        raise ApplicationError(
            "invalid_answer",
            "Pick one of the options: " + ", ".join(map(str, question.options)) + ".",
        )


def question_answer(
    *, question: Question, answer: str, user_id: int | None, stop: bool = False
) -> Question:
    """Answer a pending question, once (a second answer is a 409). The run resumes: with the
    answer as its ``ask_user`` call's result, or, for a correction, with the answer as a hint
    it observes. ``stop``: the person ends the run instead. Precondition: agency context."""
    answer = answer.strip()
    with transaction.atomic():
        execution, locked = lock_with_run(question)
        if locked.status != QuestionStatus.PENDING:
            who = f" by {locked.responded_by}" if locked.responded_by_id else ""
            raise ApplicationError(
                "already_answered",
                f"This question is already {locked.get_status_display().lower()}{who}.",
                status=409,
                current_status=locked.status,
            )
        if locked.kind == QuestionKind.CORRECTION and answer.lower() == CorrectionChoice.STOP:
            stop = True  # the correction's own "stop" option, picked as the answer
        if not stop:
            _check_answer(locked, answer)
        now = timezone.now()
        locked.status = QuestionStatus.SKIPPED if stop else QuestionStatus.ANSWERED
        locked.user_response = answer[:ANSWER_MAX_CHARS]
        locked.responded_by_id = user_id
        locked.response_timestamp = now
        waiting = execution.status == ExecutionStatus.WAITING_INPUT
        locked.resolution_action = (
            ("run stopped" if stop else "run resumed") if waiting else "run had already ended"
        )
        locked.save()
        metrics.question_resolved(locked.kind, "stopped" if stop else "answered")
        _emit(locked, "ai.question.answered", user_id=user_id, stopped=stop)
        if not waiting:
            return locked
        if stop:
            _stop(execution, locked, now=now)
        elif locked.kind == QuestionKind.CORRECTION:
            asked = question_types.handler_for(locked)
            execution_resume(
                execution=execution,
                observation=(asked.resumed(locked) if asked else None)
                or f"A person reviewed the failures of {locked.context.get('tool')} "
                f"and answered: {locked.user_response}",
                reason="correction hint given",
            )
        elif locked.tool_call_id is not None:  # the ask_user call's result (tools.executor)
            execution_resume(execution=execution, observation=None, reason="question answered")
        else:  # a question the run asked before acting (understanding/): what the person said
            execution_resume(
                execution=execution,
                observation=answered_observation(locked),
                reason="question answered",
            )
        return locked


def answered_observation(question: Question) -> str:
    """What a run observes when a person answered a question of no tool call."""
    return f'A person answered the question "{question.question}": {question.user_response}'


def _stop(execution: Execution, question: Question, *, now: datetime.datetime) -> None:
    who = f" by {question.responded_by}" if question.responded_by_id else ""
    asked = question_types.handler_for(question)  # another app's question (flow's loop one)
    if asked is not None and (stopped := asked.stopped(question, who)) is not None:
        status, reason, error = stopped
    elif question.kind == QuestionKind.CORRECTION:
        failures = question.context.get("failures") or []
        last = failures[-1].get("error", "") if failures else ""
        status, reason = ExecutionStatus.FAILED, StopReason.TOOL_FAILURES
        error = (
            f"Stopped{who} after {question.context.get('tool')} failed {len(failures)} times"
            + (f"; last error: {last}" if last else ".")
        )
    else:
        status, reason = ExecutionStatus.CANCELLED, StopReason.CANCELLED
        error = f"Stopped{who} instead of answering: {question.question[:300]}"
    _end_call(question, "question_stopped", "A person stopped the run instead.", now=now)
    lifecycle.finish_execution(execution, status=status, stop_reason=reason, error=error)
    execution.save()


def question_expire(question: Question, *, now: datetime.datetime) -> bool:
    """Expire ``question`` if it is still pending past its ``expires_at``; its run ends
    ``question_expired``. ``False`` when an answer came first. Precondition: agency context."""
    with transaction.atomic():
        execution, locked = lock_with_run(question)
        if (
            locked.status != QuestionStatus.PENDING
            or locked.expires_at is None
            or locked.expires_at > now
        ):
            return False
        locked.status = QuestionStatus.TIMED_OUT
        locked.resolution_action = "run ended: nobody answered in time"
        locked.save(update_fields=["status", "resolution_action", "updated_at"])
        metrics.question_resolved(locked.kind, "expired")
        message = (
            f"Nobody answered in time: the question expired at {locked.expires_at:%Y-%m-%d %H:%M} "
            f"UTC ({locked.question[:200]})."
        )
        _end_call(locked, "question_expired", message, now=now)
        _emit(locked, "ai.question.expired", user_id=None)
        end_waiting_run(
            execution,
            waiting=ExecutionStatus.WAITING_INPUT,
            stop_reason=StopReason.QUESTION_EXPIRED,
            error=message,
        )
        return True


def _end_call(question: Question, code: str, message: str, *, now: datetime.datetime) -> None:
    """The ask_user call that waited for the answer ends unanswered."""
    if question.tool_call_id is None:
        return
    ToolCall.objects.filter(pk=question.tool_call_id, status=ToolCallStatus.WAITING_INPUT).update(
        status=ToolCallStatus.CANCELLED,
        error=message,
        error_code=code,
        completed_at=now,
        updated_at=now,
    )


def _emit(question: Question, event_type: str, *, user_id: int | None, **extra: Any) -> None:
    payload: dict[str, Any] = {
        "question_id": str(question.id),
        "execution_id": str(question.execution_id),
        "agent_id": str(question.agent_id),
        "kind": question.kind,
        "question": question.question[:500],
        "status": question.status,
        **extra,
    }
    if user_id is not None:
        payload["answered_by"] = user_id
    event_emit(
        agency_id=question.agency_id,
        site_id=question.site_id,
        event_type=event_type,
        payload=payload,
        source_module="approvals",
        source_entity_type="question",
        source_entity_id=str(question.id),
        actor_type=ActorType.AGENT
        if event_type == "ai.question.asked"
        else (ActorType.USER if user_id else ActorType.SYSTEM),
        actor_user_id=user_id,
        actor_id=str(question.agent_id) if event_type == "ai.question.asked" else "",
    )
