"""Loop detection while a run goes (issue 19), two ways of making no progress past the
agent's ``loop_threshold`` in a run. (A failing call repeated is left to self-correction when the
agent has it: ``max_corrections`` failures ask a person.)

- The same call: the same tool with the same arguments. At the threshold the call's result
  carries a warning for the model (once), so that it can change course; the next identical call
  (past the threshold) is not run.
- The same state (seed 003's "agent repeating same state"), for agents with
  ``loop_same_state`` (off by default: five leads looked up in turn that each have no tickets
  are the same empty result five times, and progress): a call's state is what the agent
  observed, its tool and its result, whatever the arguments: a search reworded again and again
  that always finds nothing, or a lookup that keeps answering "not found". Only such empty or
  not-found results count (as investigations judge them, tools/results.py):
  the tools app does not say which tools only read, and the same informative result for
  different arguments ({"ok": true} of a send to each contact in turn) is progress. Paging on
  to other results is no loop either. The state is known once the call ran: the result that
  reaches the threshold carries the warning (unless the call's own same-call warning is there),
  and after the step of the one past it the run goes no further.

Either way the run then ends with ``loop_detected`` and the evidence in ``error_details``
(``loop_action`` stop), or waits for a person in the inbox (``ask_human``: continue, or stop).
After "continue" the count starts again from where the person let it go on. Counting is in
memory, from the run's conversation: a run that does not loop makes no query for it.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from django.db.models import Max

from agents.models import ExecutionStatus, LoopAction, StopReason
from agents.runtime.plugins import Finish, Park, Verdict
from approvals import questions
from approvals.models import QuestionKind
from core import tenancy
from core.events import event_emit
from core.models import ActorType
from flow.models import LoopDetection, LoopKind, LoopOutcome
from tools.results import NOTE_KEY, looks_wrong

if TYPE_CHECKING:  # (the LLM gateway's types only: importing it costs every process's start)
    from agents.llm import Message, ToolCall
    from agents.runtime.plugins import RunView, StepWriter

LOOP_EVENT = "ai.execution.loop_detected"
LOOP_QUESTION_TYPE = "loop"  # Question.question_type of a loop's question (approvals.questions)
CONTINUE = "continue"
STOP = "stop"
WARNING_KEY = "loop_warning"
# What the runtime adds to a result after the tool ran: not part of what the tool returned.
ADDED_KEYS = frozenset({WARNING_KEY, NOTE_KEY})
# The error of a call past max_tool_calls_per_step (agents/runtime/loop.py): it did not run.
NOT_RUN = "max_tool_calls"


def fingerprint(name: str, arguments: dict[str, Any]) -> str:
    text = json.dumps([name, arguments], sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def state_of(name: str, output: Mapping[str, Any]) -> str:
    """The fingerprint of what a call observed: its tool and its result, not its arguments."""
    return fingerprint(name, {k: v for k, v in output.items() if k not in ADDED_KEYS})


def found_nothing(output: Mapping[str, Any]) -> bool:
    """Whether a result is empty or says the thing looked for is not there (as investigations
    judge it), leaving out what the runtime added to it."""
    return looks_wrong({k: v for k, v in output.items() if k not in ADDED_KEYS}) is not None


def _result(content: str) -> dict[str, Any]:
    """A persisted tool result message's output (as ``tool_result_message`` wrote it)."""
    try:
        output = json.loads(content)
    except ValueError:
        return {"content": content}
    return output if isinstance(output, dict) else {"content": output}


def warning_text(name: str, count: int, threshold: int) -> str:
    return (
        f"Loop warning: this is call number {count} of {name} with exactly these arguments in "
        f"this run (the limit is {threshold}). Its result will not change. Do not call it again "
        "with the same arguments: use the result you have, try something else, or answer."
    )


def state_warning_text(name: str, count: int, threshold: int) -> str:
    return (
        f"Loop warning: {name} has found nothing, with this same result, {count} times in this "
        f"run (the limit is {threshold}), whatever the arguments. Calling it again is unlikely "
        "to change it: try something else, or answer with what you know."
    )


class LoopWatch:
    def __init__(self, run: RunView) -> None:
        self.run = run
        self.threshold = int(run.agent.loop_threshold or 0)
        self.action = run.agent.loop_action
        self.same_state = bool(run.agent.loop_same_state)  # off by default: see the setting
        # A failing call repeated is self-correction's to handle when the agent has it (a person
        # is asked after max_corrections failures): only calls that succeeded count then.
        self.count_failures = not run.agent.max_corrections
        self.loaded = False  # the counts below include the conversation so far
        self.counts: Counter[str] = Counter()  # calls made, per fingerprint
        self.states: Counter[str] = Counter()  # results observed, per state
        self.warn: dict[str, tuple[str, int]] = {}  # call id -> (fingerprint, count)
        # A state seen past the threshold: (call, state, count, allowed), for ``looped``.
        self.looping: tuple[ToolCall, str, int, int] | None = None

    def _load(self, messages: Sequence[Message]) -> None:
        """Count the calls of the conversation that ran (and succeeded, unless failures count)
        and what they observed: once per delivery (a resumed run has a conversation)."""
        if self.loaded:
            return
        self.loaded = True
        results = {m.tool_call_id: m for m in messages if m.role == "tool"}
        for message in messages:
            for call in message.tool_calls:
                result = results.get(call.id)
                if result is None or (result.is_error and not self.count_failures):
                    continue
                output = _result(result.content)
                error = output.get("error")
                if isinstance(error, dict) and error.get("code") == NOT_RUN:
                    continue
                self.counts[fingerprint(call.name, call.arguments)] += 1
                if self.same_state and found_nothing(output):
                    self.states[state_of(call.name, output)] += 1

    def check(self, calls: Sequence[ToolCall], messages: list[Message]) -> Verdict | None:
        """Before the reply's calls run (``messages`` ends with the reply): the verdict when
        one of them goes past the threshold, else None (and the call that reaches it is noted
        for the warning)."""
        if not self.threshold or not calls:
            return None
        self._load(messages[:-1])
        in_reply: Counter[str] = Counter()
        for call in calls:
            key = fingerprint(call.name, call.arguments)
            in_reply[key] += 1
            count = self.counts[key] + in_reply[key]
            if count < self.threshold:
                continue
            allowed = self._allowed_before(key, LoopKind.SAME_CALL) + self.threshold
            if count > allowed:
                return self._looped(LoopKind.SAME_CALL, call, key, count, allowed)
            if count == allowed:
                self.warn[call.id] = (key, count)
        return None

    def _allowed_before(self, key: str, kind: str) -> int:
        """Repeats a person already let the run go on past (answered "continue"), else 0: a
        query only once a call or a state reaches the threshold."""
        self.run.settle()
        with tenancy.agency_context(self.run.execution.agency_id):
            return self._allowed(key, kind)

    def _allowed(self, key: str, kind: str) -> int:
        found = LoopDetection.objects.filter(
            execution_id=self.run.execution.id,
            kind=kind,
            fingerprint=key,
            outcome=LoopOutcome.ASKED,
        ).aggregate(most=Max("occurrences"))["most"]
        return int(found or 0)

    def warned(
        self,
        tx: StepWriter,
        call: ToolCall,
        output: dict[str, Any],
        messages: Sequence[Message],
    ) -> dict[str, Any]:
        """``output`` with the warning when ``call`` reached the threshold, or its state did
        (recorded with the step); a state past it is kept for ``looped``. ``messages``: the
        conversation before this result."""
        if not self.threshold:
            return output
        self._load(messages)
        if self.count_failures or "error" not in output:
            key = fingerprint(call.name, call.arguments)
            self.counts[key] += 1
            # Only a result that found nothing is a state that can loop: different arguments
            # with the same informative result ({"ok": true} of a send to each contact in turn)
            # are progress, and the tools app does not say which tools only read.
            if self.same_state and found_nothing(output):
                state = state_of(call.name, output)
                self.states[state] += 1
                # From its threshold on, a call repeated as is is the same-call check's (it
                # warned, or a person let it go on): one loop, one warning and one question.
                if self.counts[key] < self.threshold:
                    output = self._same_state(tx, call, state, output)
        if call.id not in self.warn:
            return output
        key, count = self.warn.pop(call.id)
        tx.defer_insert(
            self._detection(LoopKind.SAME_CALL, call, key, count, outcome=LoopOutcome.WARNED)
        )
        return {**output, WARNING_KEY: warning_text(call.name, count, self.threshold)}

    def _same_state(
        self, tx: StepWriter, call: ToolCall, state: str, output: dict[str, Any]
    ) -> dict[str, Any]:
        count = self.states[state]
        if count < self.threshold:
            return output
        # (inside the step's transaction, in the run's agency, as the executor's own reads)
        allowed = self._allowed(state, LoopKind.SAME_STATE) + self.threshold
        if count > allowed:
            self.looping = (call, state, count, allowed)
        elif count == allowed:
            detection = self._detection(
                LoopKind.SAME_STATE, call, state, count, outcome=LoopOutcome.WARNED
            )
            tx.defer_insert(detection)
            return {**output, WARNING_KEY: state_warning_text(call.name, count, self.threshold)}
        return output

    def looped(self) -> Verdict | None:
        """Once the step of a call whose state went past the threshold is written: the
        verdict (end the run, or ask a person), else None."""
        if self.looping is None:
            return None
        call, state, count, allowed = self.looping
        self.looping = None
        return self._looped(LoopKind.SAME_STATE, call, state, count, allowed)

    def _detection(
        self,
        kind: LoopKind,
        call: ToolCall,
        key: str,
        count: int,
        *,
        outcome: str,
        question: Any = None,
    ) -> LoopDetection:
        execution = self.run.execution
        return LoopDetection(
            agency_id=execution.agency_id,
            execution_id=execution.id,
            agent_id=execution.agent_id,
            kind=kind,
            outcome=outcome,
            fingerprint=key,
            repeated=[{"tool": call.name, "arguments": call.arguments}],
            occurrences=count,
            threshold=self.threshold,
            question=question,
        )

    def _looped(
        self, kind: LoopKind, call: ToolCall, key: str, count: int, allowed: int
    ) -> Verdict:
        """End the run, or ask a person: the runtime applies it (a run whose cancel came first
        is cancelled instead), with the detection row and event in the same transaction."""
        evidence = {
            "kind": kind.value,
            "tool": call.name,
            "arguments": call.arguments,  # a same state's: the last call's
            "occurrences": count,
            "threshold": self.threshold,
            "allowed": allowed,
            "action": self.action,
        }
        if kind == LoopKind.SAME_CALL:
            what = f"{call.name} was called {count} times with the same arguments"
            repeated, go_on = f"{call.name} repeated {count} times", "the call runs"
        else:
            what = f"{call.name} returned the same result {count} times, whatever the arguments"
            repeated, go_on = f"{call.name} returned the same result {count} times", "it goes on"
        message = f"Loop detected: {what} (loop threshold {self.threshold}), after a warning."
        execution = self.run.execution
        if self.action == LoopAction.ASK_HUMAN:

            def ask(tx: StepWriter) -> dict[str, Any]:
                question = questions.question_create(
                    execution_id=execution.id,
                    agency_id=execution.agency_id,
                    site_id=execution.site_id,
                    agent_id=execution.agent_id,
                    kind=QuestionKind.CORRECTION,
                    question=f"{message} Let it go on ({go_on}), or stop the run?",
                    options=[CONTINUE, STOP],
                    question_type=LOOP_QUESTION_TYPE,
                    triggered_by=repeated,
                    context={"loop": evidence},
                )
                tx.defer_insert(
                    self._detection(
                        kind, call, key, count, outcome=LoopOutcome.ASKED, question=question
                    )
                )
                _emit(execution, {**evidence, "outcome": LoopOutcome.ASKED.value})
                return questions.input_request_for(question)

            return Park(reason=f"{repeated}: asking a person", write=ask)

        def stop(tx: StepWriter) -> None:
            tx.defer_insert(self._detection(kind, call, key, count, outcome=LoopOutcome.STOPPED))
            _emit(execution, {**evidence, "outcome": LoopOutcome.STOPPED.value})

        return Finish(
            ExecutionStatus.FAILED,
            StopReason.LOOP_DETECTED,
            error=message,
            error_details={"loop": evidence},
            write=stop,
        )


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
    tool, times = loop.get("tool"), loop.get("occurrences")
    if loop.get("kind") == LoopKind.SAME_STATE:
        what = f"{tool} returned the same result {times} times"
    else:
        what = f"{tool} called {times} times with the same arguments"
    return ExecutionStatus.FAILED, StopReason.LOOP_DETECTED, f"Stopped{who} after a loop: {what}."


def question_resumed(question: Any) -> str | None:
    """The observation a run resumes with after a person let its loop go on; None for any
    other question."""
    if question.question_type != LOOP_QUESTION_TYPE:
        return None
    loop = (question.context or {}).get("loop") or {}
    if loop.get("kind") == LoopKind.SAME_STATE:
        return (
            f"A person reviewed the repeated results of {loop.get('tool')} and answered: "
            f"{question.user_response}. The same result again means no progress: change course "
            "or answer."
        )
    return (
        f"A person reviewed the repeated calls of {loop.get('tool')} and answered: "
        f"{question.user_response}. The repeated call now runs once more; do not repeat it "
        "again without a reason."
    )
