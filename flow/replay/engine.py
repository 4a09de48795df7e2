"""Replay (dry): a finished or failed run's recorded model replies, in order, instead of calling
the provider, with each tool call they made decided again against the tools as they are now —
policy (the agent's patterns, the tool's permissions and modules), JSON Schema validation of the
arguments and the risk rules — and never run: a replayed call's result is
``{"dry_run": true, "would_call": ...}`` (the tools app marks no tool read-only, so none runs).
Rate limits are not evaluated (checking one counts a call). Nothing is written: the replay reads
inside a transaction that is rolled back.

Each call is compared with what the original run recorded for it; a difference (a tool now
denied or gone, a schema now refusing the arguments, a risk rule now requiring approval, or the
reverse) is what a developer changing an agent's prompt or tools wants to see.

Precondition for :func:`replay_execution`: in the execution's agency context.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from agents.llm.types import ToolCall as LLMToolCall
from agents.models import Agent, Execution, ExecutionStep, StepType
from approvals import risk as risk_rules
from approvals.models import Approval
from approvals.risk import assess_risk
from core.exceptions import ApplicationError
from tools import access, registry
from tools.models import Tool
from tools.selectors import active_tools, agency_enabled_modules
from tools.validation import describe_argument_errors, validate_arguments

ALLOWED = "allowed"
VALID, INVALID, NOT_CHECKED = "valid", "invalid", "-"
APPROVAL, NO_APPROVAL = "approval required", "none"
UNKNOWN_TOOL = "unknown_tool"
ACCESS_CODES = {access.TOOL_NOT_ALLOWED, access.MISSING_PERMISSION, access.MODULE_DISABLED}


@dataclass(frozen=True, slots=True)
class Verdict:
    """How one call was (original) or would now be (replayed) decided."""

    access: str = ALLOWED  # "allowed", or the refusal's code
    validation: str = NOT_CHECKED
    risk: str = NOT_CHECKED
    detail: str = ""  # the refusal's message, the validation errors or the risk reason
    result: dict[str, Any] | None = None  # the recorded result, or the dry run's

    def as_dict(self) -> dict[str, Any]:
        return {
            "access": self.access,
            "validation": self.validation,
            "risk": self.risk,
            "detail": self.detail,
            "result": self.result,
        }


@dataclass(frozen=True, slots=True)
class CallReplay:
    think_step: int
    act_step: int | None
    tool_call_id: str
    tool_name: str
    arguments: Any
    original: Verdict
    replayed: Verdict
    differences: tuple[str, ...] = ()

    @property
    def arguments_text(self) -> str:
        return json.dumps(self.arguments, default=str, ensure_ascii=False)

    def as_dict(self) -> dict[str, Any]:
        return {
            "think_step": self.think_step,
            "act_step": self.act_step,
            "tool_call_id": self.tool_call_id,
            "tool_name": self.tool_name,
            "arguments": self.arguments,
            "original": self.original.as_dict(),
            "replayed": self.replayed.as_dict(),
            "differences": list(self.differences),
        }


@dataclass(frozen=True, slots=True)
class ReplayReport:
    execution_id: str
    agent_name: str
    status: str
    replies: int  # recorded model replies fed in
    calls: tuple[CallReplay, ...] = ()
    final_answer: str = ""
    notes: tuple[str, ...] = field(default=())

    @property
    def differences(self) -> int:
        return sum(len(c.differences) for c in self.calls)

    def as_dict(self) -> dict[str, Any]:
        return {
            "execution_id": self.execution_id,
            "agent": self.agent_name,
            "status": self.status,
            "replies": self.replies,
            "differences": self.differences,
            "calls": [c.as_dict() for c in self.calls],
            "final_answer": self.final_answer,
            "notes": list(self.notes),
        }

    def to_text(self) -> str:
        """The report as ``replay_execution`` prints it."""
        lines = [
            f"Replay (dry) of run {self.execution_id} ({self.agent_name}, {self.status}): "
            f"{self.replies} recorded model repl{'y' if self.replies == 1 else 'ies'}, "
            f"{len(self.calls)} tool call(s), no side effect applied.",
        ]
        for call in self.calls:
            args = call.arguments_text
            if len(args) > 200:
                args = args[:197] + "..."
            where = f"step {call.think_step}" + (f"/{call.act_step}" if call.act_step else "")
            lines.append(f"- {where} {call.tool_name}({args})")
            for side, verdict in (("original", call.original), ("replayed", call.replayed)):
                lines.append(
                    f"    {side:<8}  access: {verdict.access}  validation: {verdict.validation}"
                    f"  risk: {verdict.risk}"
                )
            lines.extend(f"    DIFFERENT: {d}" for d in call.differences)
        lines.extend(f"Note: {n}" for n in self.notes)
        if self.final_answer:
            answer = self.final_answer
            answer = answer if len(answer) <= 300 else answer[:297] + "..."
            lines.append(f"Final answer (recorded): {answer}")
        lines.append(
            "No difference." if not self.differences else f"{self.differences} difference(s)."
        )
        return "\n".join(lines) + "\n"


def _error_code(output: Any) -> str | None:
    if isinstance(output, dict) and isinstance(output.get("error"), dict):
        return str(output["error"].get("code") or "error")
    if isinstance(output, dict) and "error" in output:
        return "error"
    return None


def _error_message(output: Any) -> str:
    if isinstance(output, dict) and isinstance(output.get("error"), dict):
        return str(output["error"].get("message") or "")
    return ""


def _original(
    call: LLMToolCall, act: ExecutionStep | None, approved: set[str], offered: set[str] | None
) -> Verdict:
    """What the run recorded for the call: its act step's result (or error) and whether an
    approval was asked for it. ``offered``: the tools of the run's snapshot (None: not kept)."""
    risk = APPROVAL if call.id in approved else NO_APPROVAL
    if act is None:  # the run ended before the call ran (cancelled, timed out, waiting)
        if offered is not None and call.name not in offered:
            return Verdict(access.TOOL_NOT_ALLOWED, detail="not offered to the run")
        return Verdict(ALLOWED, NOT_CHECKED, risk, detail="never ran")
    output = act.tool_output
    code = _error_code(output)
    if code in ACCESS_CODES:
        return Verdict(code or "", detail=_error_message(output), result=output)
    if code == "invalid_arguments":
        return Verdict(ALLOWED, INVALID, NOT_CHECKED, _error_message(output), output)
    return Verdict(ALLOWED, VALID, risk, _error_message(output) if code else "", output)


def _replayed(
    call: LLMToolCall, *, agent: Agent, tools: dict[str, Tool], modules: frozenset[str]
) -> Verdict:
    """The call decided against the tools now, in tools.executor's order; never run."""
    tool = tools.get(call.name)
    if tool is None or registry.get_handler(call.name) is None:
        return Verdict(UNKNOWN_TOOL, detail=f"No active tool {call.name!r} with a handler now.")
    decision = access.decide_tool(
        call.name,
        requires_permissions=tool.requires_permissions,
        requires_modules=tool.requires_modules,
        allowed=agent.allowed_tools,
        denied=agent.denied_tools,
        enabled_modules=modules,
    )
    if not decision.allowed:
        return Verdict(decision.code, detail=decision.message)
    if call.arguments_error:
        return Verdict(ALLOWED, INVALID, NOT_CHECKED, f"{call.arguments_error}.")
    errors = validate_arguments(tool.parameters_schema, call.arguments)
    if errors:
        return Verdict(ALLOWED, INVALID, NOT_CHECKED, describe_argument_errors(call.name, errors))
    risk = assess_risk(
        agency_id=agent.agency_id,
        tool_name=call.name,
        arguments=call.arguments,
        dangerous=tool.is_dangerous,
        constraints=list(agent.constraints or []),
    )
    would = {"dry_run": True, "would_call": call.name, "arguments": call.arguments}
    if risk.needs_approval:
        return Verdict(ALLOWED, VALID, APPROVAL, f"{risk.reason} ({risk.risk_level})", would)
    return Verdict(ALLOWED, VALID, NO_APPROVAL, "", would)


def _differences(original: Verdict, replayed: Verdict) -> tuple[str, ...]:
    found: list[str] = []
    if original.access != replayed.access:
        if replayed.access == UNKNOWN_TOOL:
            found.append(f"the tool is gone (removed, renamed or inactive): {replayed.detail}")
        elif replayed.access != ALLOWED:
            found.append(f"now refused ({replayed.access}): {replayed.detail}")
        else:
            found.append(f"now allowed (was {original.access})")
        return tuple(found)  # the later checks were not both evaluated
    both_checked = NOT_CHECKED not in (original.validation, replayed.validation)
    if both_checked and original.validation != replayed.validation:
        if replayed.validation == INVALID:
            found.append(f"the schema now refuses the arguments: {replayed.detail}")
        else:
            found.append("the schema now accepts the arguments (they were refused)")
        return tuple(found)
    both_checked = NOT_CHECKED not in (original.risk, replayed.risk)
    if both_checked and original.risk != replayed.risk:
        if replayed.risk == APPROVAL:
            found.append(f"now requires approval: {replayed.detail}")
        else:
            found.append("no longer requires approval")
    return tuple(found)


def replay_execution(execution: Execution) -> ReplayReport:
    """Replay ``execution`` (finished or failed) dry and compare it with what it recorded."""
    if not execution.is_terminal:
        raise ApplicationError(
            "not_ended",
            f"Run {execution.pk} is {execution.status}: only a run that has ended can be replayed.",
        )
    with transaction.atomic():
        report = _replay(execution)
        transaction.set_rollback(True)  # read only; a dry run leaves nothing behind
    return report


def _replay(execution: Execution) -> ReplayReport:
    # The rules as they are now, not as this process cached them a moment ago: a developer
    # replays right after changing one.
    risk_rules.clear_cache()
    agent = Agent.objects.get(pk=execution.agent_id)
    steps = list(execution.steps.order_by("step_number"))
    acts = {s.tool_call_id: s for s in steps if s.step_type == StepType.ACT and s.tool_call_id}
    approved = set(
        Approval.objects.filter(execution_id=execution.pk)
        .exclude(tool_call__isnull=True)
        .values_list("tool_call__tool_call_id", flat=True)
    )
    kept = (execution.config_snapshot or {}).get("tools")
    snapshot_tools = {t["name"] for t in kept} if isinstance(kept, list) else None
    tools = {t.name: t for t in active_tools(agent.agency_id)}
    modules = agency_enabled_modules(agent.agency_id)
    calls: list[CallReplay] = []
    replies = 0
    final = ""
    for step in steps:
        response = step.llm_response if isinstance(step.llm_response, dict) else None
        if step.step_type != StepType.THINK or not response or "message" not in response:
            continue
        replies += 1
        message = response["message"]
        recorded = [LLMToolCall.from_dict(c) for c in message.get("tool_calls") or []]
        if not recorded:
            final = str(message.get("content") or "")
        for call in recorded:
            act = acts.get(call.id)
            original = _original(call, act, approved, snapshot_tools)
            replayed = _replayed(call, agent=agent, tools=tools, modules=modules)
            calls.append(
                CallReplay(
                    think_step=step.step_number,
                    act_step=act.step_number if act else None,
                    tool_call_id=call.id,
                    tool_name=call.name,
                    arguments=call.arguments if not call.arguments_error else call.raw_arguments,
                    original=original,
                    replayed=replayed,
                    differences=_differences(original, replayed),
                )
            )
    notes = []
    if not replies:
        notes.append("The run recorded no model reply: nothing to replay.")
    return ReplayReport(
        execution_id=str(execution.pk),
        agent_name=agent.name,
        status=execution.status,
        replies=replies,
        calls=tuple(calls),
        final_answer=final,
        notes=tuple(notes),
    )
