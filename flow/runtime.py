"""Flow analysis while a run goes (its hooks in the runtime: flow/run_plugin.py): decision
points, written with the step they belong to, and loop detection (flow/loops.py).

Decision points (seed 003 ``agent_execution_decision_points``) are recorded where the runtime
decides: the tool(s) the model chose among the allowed ones (with its reasoning text), a final
answer instead of another call, what it did after a failed call (error recovery), a policy or
risk verdict (a call refused by policy, or routed to a person for approval), and a person's
approval decision, and a risk rule that matched a call and let it run without one. Each row
rides along with its step's one statement (``tx.defer_row``): no round trip of its own
(docs/decisions/0003-runtime-write-path.md); the rows are built by flow/decisions.py.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.utils import timezone
from psycopg.types.json import Jsonb

from agents.llm import Completion, Message, ToolCall
from agents.models import DecisionMethod, DecisionType
from approvals.models import Approval, ApprovalStatus
from approvals.risk import RiskDecision
from flow import decisions, loops, stuck
from flow.decisions import REASONING_MAX
from tools.models import ToolCallStatus, idempotency_key_for

if TYPE_CHECKING:
    from agents.runtime.plugins import RunView, StepWriter, Verdict
    from tools.calls import ToolOutcome

# The choices after a failed call, in this order (``chosen_option_index``).
_RECOVERY_OPTIONS = decisions.json_once(["retry the same tool", "call another tool", "answer"])
_MICROSECOND = datetime.timedelta(microseconds=1)


class RunFlow:
    """One delivery's flow tracking of a run (created with its plugin: flow/run_plugin.py)."""

    def __init__(self, run: RunView) -> None:
        self.run = run
        self.record = settings.AGENTDESK_FLOW_DECISION_POINTS
        self.options = run.tool_names  # what the model could choose from
        self.options_json = decisions.json_once(self.options)  # serialized once per delivery
        self.loops = loops.LoopWatch(run)
        # Tools whose calls failed since the model last replied (error recovery decisions).
        self.failed: list[str] = []

    # --- think --------------------------------------------------------------------------------
    def replied(self, tx: StepWriter, completion: Completion, *, step_id: uuid.UUID) -> None:
        """The model's reply, persisted by ``tx``: its tool choice (or its final answer), and
        what it did after failed calls. Adds rows only (it runs inside ``direct_step``)."""
        if not self.record:
            self.failed = []
            return
        at = timezone.now()  # a microsecond apart, in the order decided (the admin's order)
        calls = completion.tool_calls
        reasoning = (completion.text or "")[:REASONING_MAX]
        if self.failed:
            failed = sorted(set(self.failed))
            chosen_names = [call.name for call in calls]
            again = [name for name in chosen_names if name in failed]
            choice = (
                "retry " + ", ".join(again)
                if again
                else ("another tool: " + ", ".join(chosen_names) if chosen_names else "answer")
            )
            self._reply_row(
                tx,
                step_id,
                at,
                decision_type=DecisionType.ERROR_RECOVERY,
                decision_question=f"{', '.join(failed)} failed: what next?",
                available_options=_RECOVERY_OPTIONS,
                chosen_option={"choice": choice, "tools": chosen_names},
                chosen_option_index=0 if again else (1 if chosen_names else 2),
                reasoning=reasoning,
            )
            at += _MICROSECOND
            self.failed = []
        for call in calls:
            self._reply_row(
                tx,
                step_id,
                at,
                decision_type=DecisionType.TOOL_SELECTION,
                decision_question="Which tool should I use?",
                available_options=self.options_json,
                chosen_option={"tool": call.name, "arguments": call.arguments},
                chosen_option_index=_index(self.options, call.name),
                reasoning=reasoning,
            )
            at += _MICROSECOND
        if not calls:
            self._reply_row(
                tx,
                step_id,
                at,
                decision_type=DecisionType.COMPLETION,
                decision_question="Answer now, or call a tool?",
                available_options=Jsonb(["answer", *self.options]),
                chosen_option={"answer": (completion.text or "")[:500]},
                chosen_option_index=0,
            )

    def _reply_row(
        self,
        tx: StepWriter,
        step_id: uuid.UUID,
        decided_at: datetime.datetime,
        **values: Any,
    ) -> None:
        execution = self.run.execution
        tx.defer_row(
            decisions.row(
                agency_id=execution.agency_id,
                execution_id=execution.id,
                step_id=step_id,
                decided_at=decided_at,
                decision_method=DecisionMethod.LLM_BASED,
                **values,
            )
        )

    def check_reply(self, calls: Sequence[ToolCall], messages: list[Message]) -> Verdict | None:
        """Before the reply's calls run: the verdict if they make a loop (end the run, or ask
        a person), else None."""
        return self.loops.check(calls, messages)

    # --- act ----------------------------------------------------------------------------------
    def tool_settled(
        self,
        tx: StepWriter,
        call: ToolCall,
        outcome: ToolOutcome,
        *,
        step_id: uuid.UUID | None,
        resumed: bool,
    ) -> None:
        """A call decided by the executor: a policy refusal, an approval routing, or a risk rule
        that matched and let the call run is a risk verdict; a resumed call that waited for
        approval records the person's decision."""
        if not self.record:
            return
        held = outcome.held  # (a tool gate holds it for a person: an approval, a question)
        if held is not None or outcome.awaiting is not None:
            step_id = None  # the call parks the run: its act step is written when it runs
        if held is not None and isinstance(held.record, Approval):
            approval = held.record
            self._decide(
                tx,
                None,
                decision_type=DecisionType.RISK_ASSESSMENT,
                decision_question=f"May {call.name} run without a person's approval?",
                available_options=["run", "ask a person"],
                chosen_option={
                    "choice": "ask a person",
                    "risk_level": approval.risk_level,
                    "approval_id": str(approval.id),
                },
                chosen_option_index=1,
                reasoning=approval.risk_explanation or "",
                decision_method=DecisionMethod.RULE_BASED,
                rules_applied=[approval.risk_rule_id] if approval.risk_rule_id else [],
            )
            return
        # (a note only when a rule matched and let the call run: not for every call)
        risk = next((n for n in outcome.notes if isinstance(n, RiskDecision)), None)
        if risk is not None and not outcome.replayed:
            self._decide(
                tx,
                step_id,
                decision_type=DecisionType.RISK_ASSESSMENT,
                decision_question=f"May {call.name} run without a person's approval?",
                available_options=["run", "ask a person"],
                chosen_option={"choice": "run", "risk_level": risk.risk_level},
                chosen_option_index=0,
                reasoning=risk.reason,
                decision_method=DecisionMethod.RULE_BASED,
                rules_applied=[risk.rule_id] if risk.rule_id else [],
            )
        error = outcome.output.get("error") or {}
        # (a person's denial is recorded as their decision, below)
        refused = error.get("code") != "approval_denied"
        if outcome.status == ToolCallStatus.DENIED and not outcome.replayed and refused:
            self._decide(
                tx,
                step_id,
                decision_type=DecisionType.RISK_ASSESSMENT,
                decision_question=f"May {call.name} run under the agent's policy?",
                available_options=["run", "refuse"],
                chosen_option={"choice": "refuse", "code": error.get("code", "")},
                chosen_option_index=1,
                reasoning=str(error.get("message", ""))[:REASONING_MAX],
                decision_method=DecisionMethod.RULE_BASED,
            )
        if resumed and not outcome.replayed:
            self._approval_decided(tx, call, step_id)

    def _approval_decided(self, tx: StepWriter, call: ToolCall, step_id: uuid.UUID | None) -> None:
        """A resumed call that waited for approval: the person's decision (one query, only on
        the resumed path)."""
        execution = self.run.execution
        # (inside the step's transaction, in the run's agency, as the executor's own reads)
        approval = (
            Approval.objects.filter(
                execution_id=execution.id,
                tool_call__idempotency_key=idempotency_key_for(execution.id, call.id),
            )
            .exclude(status=ApprovalStatus.PENDING)
            .order_by("-created_at")
            .values("id", "status", "decision_reason", "edited_arguments", "decided_by_id")
            .first()
        )
        if approval is None:
            return
        self._decide(
            tx,
            step_id,
            **decisions.approval_decided(
                tool_name=call.name,
                approval_id=approval["id"],
                status=str(approval["status"]),
                reason=str(approval["decision_reason"] or ""),
                edited=approval["edited_arguments"] is not None,
                decided_by=approval["decided_by_id"],
            ),
        )

    def result(
        self,
        tx: StepWriter,
        call: ToolCall,
        output: dict[str, Any],
        messages: Sequence[Message],
    ) -> dict[str, Any]:
        """The call's result as the model will see it: with the loop warning when this call,
        or what it observed, reached the threshold (``messages``: the conversation before it).
        Notes failures for the next reply's error recovery decision."""
        if "error" in output:
            self.failed.append(call.name)
        return self.loops.warned(tx, call, output, messages)

    def looped(self) -> Verdict | None:
        """Right after a call's step is written: the verdict if what it observed made a loop
        (the same state past the threshold: end the run, or ask a person)."""
        return self.loops.looped()

    # --- end ----------------------------------------------------------------------------------
    def cancel_reason(self) -> tuple[str, str] | None:
        """(stop reason, error) of a run that stops because stuck detection asked for its
        cancel (flow.stuck); None for any other cancel (the runtime's plain one)."""
        return stuck.cancel_reason(self.run.execution)

    def _decide(
        self,
        tx: StepWriter,
        step_id: uuid.UUID | None,
        *,
        available_options: list[str],
        **values: Any,
    ) -> None:
        execution = self.run.execution
        tx.defer_row(
            decisions.row(
                agency_id=execution.agency_id,
                execution_id=execution.id,
                step_id=step_id,
                decided_at=timezone.now(),
                available_options=Jsonb(available_options),
                **values,
            )
        )


def _index(options: list[str], chosen: str) -> int | None:
    try:
        return options.index(chosen)
    except ValueError:
        return None
