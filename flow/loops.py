"""Loop detection while a run goes (issue 19): the same tool called with the same arguments
more than the agent's ``loop_threshold`` times in a run. (A failing call repeated is left to
self-correction when the agent has it: ``max_corrections`` failures ask a person.)

At the threshold the call's result carries a warning for the model (once), so that it can change
course; the next identical call (past the threshold) is not run: the run ends with
``loop_detected`` and the evidence in ``error_details`` (``loop_action`` stop), or waits for a
person in the inbox (``ask_human``: continue, or stop). After "continue" the count for that call
starts again from where the person let it go on. Counting is in memory, from the run's
conversation: a run that does not loop makes no query for it.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from django.db.models import Max

from agents.llm import Message, ToolCall
from agents.models import ExecutionStatus, LoopAction, StopReason
from agents.runtime import store
from core import tenancy
from core.events import event_emit
from core.models import ActorType
from flow.models import LoopDetection, LoopKind, LoopOutcome

if TYPE_CHECKING:
    from agents.runtime.loop import _Run
    from agents.runtime.store import StepTransaction

LOOP_EVENT = "ai.execution.loop_detected"
LOOP_QUESTION_TYPE = "loop"  # Question.question_type of a loop's question (approvals.questions)
CONTINUE = "continue"
STOP = "stop"


def fingerprint(name: str, arguments: dict[str, Any]) -> str:
    text = json.dumps([name, arguments], sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def warning_text(name: str, count: int, threshold: int) -> str:
    return (
        f"Loop warning: this is call number {count} of {name} with exactly these arguments in "
        f"this run (the limit is {threshold}). Its result will not change. Do not call it again "
        "with the same arguments: use the result you have, try something else, or answer."
    )


class LoopWatch:
    def __init__(self, run: _Run) -> None:
        self.run = run
        self.threshold = int(run.agent.loop_threshold or 0)
        self.action = run.agent.loop_action
        # A failing call repeated is self-correction's to handle when the agent has it (a person
        # is asked after max_corrections failures): only calls that succeeded count then.
        self.count_failures = not run.agent.max_corrections
        self.counts: Counter[str] | None = None  # calls made, per fingerprint
        self.warn: dict[str, tuple[str, int]] = {}  # call id -> (fingerprint, count)

    def _count(self, messages: Sequence[Message]) -> Counter[str]:
        """The calls of the conversation that ran (and succeeded, unless failures count)."""
        failed = {m.tool_call_id: m.is_error for m in messages if m.role == "tool"}
        counts: Counter[str] = Counter()
        for message in messages:
            for call in message.tool_calls:
                if call.id in failed and (self.count_failures or not failed[call.id]):
                    counts[fingerprint(call.name, call.arguments)] += 1
        return counts

    def check(self, calls: Sequence[ToolCall], messages: list[Message]) -> str | None:
        """Before the reply's calls run (``messages`` ends with the reply): the run's status
        when one of them goes past the threshold, else None (and the call that reaches it is
        noted for the warning)."""
        if not self.threshold or not calls:
            return None
        if self.counts is None:  # the conversation so far (a resumed run has one)
            self.counts = self._count(messages[:-1])
        in_reply: Counter[str] = Counter()
        for call in calls:
            key = fingerprint(call.name, call.arguments)
            in_reply[key] += 1
            count = self.counts[key] + in_reply[key]
            if count < self.threshold:
                continue
            allowed = self._allowed_before(key) + self.threshold
            if count > allowed:
                return self._looped(call, key, count, allowed)
            if count == allowed:
                self.warn[call.id] = (key, count)
        return None

    def _allowed_before(self, key: str) -> int:
        """Calls a person already let the run go on past (answered "continue"), else 0: a
        query only once a call reaches the threshold."""
        self.run._settle()
        with tenancy.agency_context(self.run.execution.agency_id):
            found = LoopDetection.objects.filter(
                execution_id=self.run.execution.id, fingerprint=key, outcome=LoopOutcome.ASKED
            ).aggregate(most=Max("occurrences"))["most"]
        return int(found or 0)

    def warned(self, tx: StepTransaction, call: ToolCall, output: dict[str, Any]) -> dict[str, Any]:
        """``output`` with the warning when ``call`` reached the threshold (recorded with the
        step)."""
        if self.counts is not None and (self.count_failures or "error" not in output):
            self.counts[fingerprint(call.name, call.arguments)] += 1
        if call.id not in self.warn:
            return output
        key, count = self.warn.pop(call.id)
        tx.defer_insert(self._detection(call, key, count, LoopOutcome.WARNED))
        return {**output, "loop_warning": warning_text(call.name, count, self.threshold)}

    def _detection(
        self, call: ToolCall, key: str, count: int, outcome: str, question: Any = None
    ) -> LoopDetection:
        execution = self.run.execution
        return LoopDetection(
            agency_id=execution.agency_id,
            execution_id=execution.id,
            agent_id=execution.agent_id,
            kind=LoopKind.SAME_CALL,
            outcome=outcome,
            fingerprint=key,
            repeated=[{"tool": call.name, "arguments": call.arguments}],
            occurrences=count,
            threshold=self.threshold,
            question=question,
        )

    def _looped(self, call: ToolCall, key: str, count: int, allowed: int) -> str:
        run = self.run
        if run._cancel_requested():
            return run._end_cancelled()
        evidence = {
            "kind": LoopKind.SAME_CALL.value,
            "tool": call.name,
            "arguments": call.arguments,
            "occurrences": count,
            "threshold": self.threshold,
            "allowed": allowed,
            "action": self.action,
        }
        message = (
            f"Loop detected: {call.name} was called {count} times with the same arguments "
            f"(loop threshold {self.threshold}), after a warning."
        )
        execution = run.execution
        if self.action == LoopAction.ASK_HUMAN:
            from approvals import questions  # noqa: PLC0415 - approvals imports the runtime
            from approvals.models import QuestionKind  # noqa: PLC0415

            with store.step_transaction(execution, run.worker) as tx:
                question = questions.question_create(
                    execution_id=execution.id,
                    agency_id=execution.agency_id,
                    site_id=execution.site_id,
                    agent_id=execution.agent_id,
                    kind=QuestionKind.CORRECTION,
                    question=f"{message} Let it go on (the call runs), or stop the run?",
                    options=[CONTINUE, STOP],
                    question_type=LOOP_QUESTION_TYPE,
                    triggered_by=f"{call.name} repeated {count} times",
                    context={"loop": evidence},
                )
                tx.defer_insert(self._detection(call, key, count, LoopOutcome.ASKED, question))
                _emit(execution, {**evidence, "outcome": LoopOutcome.ASKED.value})
                tx.park(
                    ExecutionStatus.WAITING_INPUT,
                    reason=f"{call.name} repeated {count} times: asking a person",
                    input_request=questions.input_request_for(question),
                )
            return run._parked(ExecutionStatus.WAITING_INPUT)
        with store.step_transaction(execution, run.worker) as tx:
            tx.defer_insert(self._detection(call, key, count, LoopOutcome.STOPPED))
            _emit(execution, {**evidence, "outcome": LoopOutcome.STOPPED.value})
            tx.finish(
                ExecutionStatus.FAILED,
                stop_reason=StopReason.LOOP_DETECTED,
                error=message,
                error_details={"loop": evidence},
            )
        return ExecutionStatus.FAILED


def _emit(execution: Any, payload: dict[str, Any]) -> None:
    event_emit(
        agency_id=execution.agency_id,
        site_id=execution.site_id,
        event_type=LOOP_EVENT,
        payload={
            "execution_id": str(execution.id),
            "agent_id": str(execution.agent_id),
            **payload,
        },
        source_module="flow",
        source_entity_type="execution",
        source_entity_id=str(execution.id),
        actor_type=ActorType.AGENT,
        actor_id=str(execution.agent_id),
    )


def question_stopped(question: Any, who: str) -> tuple[str, str, str] | None:
    """(status, stop reason, error) of a run whose loop question a person answered "stop";
    None for any other question (approvals.questions asks)."""
    if question.question_type != LOOP_QUESTION_TYPE:
        return None
    loop = (question.context or {}).get("loop") or {}
    return (
        ExecutionStatus.FAILED,
        StopReason.LOOP_DETECTED,
        f"Stopped{who} after a loop: {loop.get('tool')} called {loop.get('occurrences')} times "
        "with the same arguments.",
    )


def question_resumed(question: Any) -> str | None:
    """The observation a run resumes with after a person let its loop go on; None for any
    other question."""
    if question.question_type != LOOP_QUESTION_TYPE:
        return None
    loop = (question.context or {}).get("loop") or {}
    return (
        f"A person reviewed the repeated calls of {loop.get('tool')} and answered: "
        f"{question.user_response}. The repeated call now runs once more; do not repeat it "
        "again without a reason."
    )
