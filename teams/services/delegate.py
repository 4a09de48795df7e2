"""The ``delegate_to_agent`` call (teams.tool): its arguments checked, the delegated run started
for the calling run, which waits for it, and the waiting call's result when the delegating run
resumes: the delegated run's answer, or its failure as a tool error. What the delegated run may
do is decided at its start (teams.services.limits)."""

from __future__ import annotations

import datetime
import json
import uuid
from typing import Any

from django.conf import settings
from django.utils import timezone

from agents.models import (
    INPUT_MAX_CHARS,
    TERMINAL_STATUSES,
    Agent,
    AgentMessage,
    Execution,
    ExecutionStatus,
    MessageChannel,
    MessageType,
    TriggerType,
)
from agents.services import execution_create, skipped_trigger
from teams.services.limits import child_constraints, delivery_queue
from tools.handlers import AwaitRun, ToolContext, ToolError, ToolResult
from tools.patterns import pattern_matches

TOOL_NAME = "delegate_to_agent"
INPUT_REQUEST_KIND = "agent"  # Execution.input_request["kind"] of a run waiting for another
INSTRUCTION_MAX_CHARS = 8000
INPUT_MAX_BYTES = 10_000
# What a delegated run's answer may bring back into the delegating run's context.
OUTPUT_MAX_CHARS = 20_000


# --- starting a delegated run -----------------------------------------------------------------
def delegation_start(
    *, ctx: ToolContext, agent_slug: str, instruction: str, input_data: dict[str, Any]
) -> ToolResult:
    """Start ``agent_slug``'s run for the calling run (``ctx``) and make the call wait for it.
    Refusals are :class:`ToolError` (the model sees them). Precondition: inside the calling
    run's tool transaction (its agency context); everything written here commits with its park.
    """
    parent = Execution.objects.select_related("agent").get(pk=ctx.execution_id)
    caller = parent.agent
    target = _target(caller, parent, agent_slug)
    depth = parent.depth + 1
    limit = settings.AGENTDESK_MAX_RUN_CHAIN_DEPTH
    if depth > limit:
        raise ToolError(
            "chain_too_deep",
            f"This run is already {parent.depth} delegations or events deep; runs may chain at "
            f"most {limit} deep (AGENTDESK_MAX_RUN_CHAIN_DEPTH). Do the task yourself.",
        )
    now = timezone.now()
    constraints = child_constraints(parent, target, now=now)
    request_id = uuid.uuid4()
    message_id = uuid.uuid4()
    queue = delivery_queue()
    delegation = {
        **constraints,
        "parent_execution_id": str(parent.id),
        "parent_agent_id": str(caller.id),
        "parent_agent": caller.slug,
        "tool_call_id": ctx.tool_call_id,
        "request_id": str(request_id),
        "request_message_id": str(message_id),
        "queue": queue,
    }
    child = execution_create(
        agent=target,
        trigger_type=TriggerType.AGENT,
        input=_child_input(instruction, input_data),
        trigger_data={
            "delegated_by": {
                "execution_id": str(parent.id),
                "agent": caller.slug,
                "agent_id": str(caller.id),
            },
            "instruction": instruction,
            "input": input_data,
        },
        parent_id=parent.id,
        depth=depth,
        initial_context={"delegation": delegation},
        queue=queue,
    )
    if child is None:
        skipped = skipped_trigger(target)
        why = skipped.skip_detail if skipped is not None else "it could not start"
        raise ToolError(
            "agent_not_started",
            f"The agent {target.slug!r} did not start a run: {why}.",
            agent=target.slug,
        )
    AgentMessage.objects.create(
        id=message_id,
        agency_id=parent.agency_id,
        from_execution=parent,
        to_execution=child,
        from_agent=caller,
        to_agent=target,
        message_type=MessageType.TASK_DELEGATION,
        content={
            "instruction": instruction,
            "input": input_data,
            "tool_call_id": ctx.tool_call_id,
            "constraints": constraints,
        },
        is_request=True,
        request_id=request_id,
        channel=MessageChannel.TASK_QUEUE,
        sent_at=now,
    )
    deadline = datetime.datetime.fromisoformat(constraints["deadline"])
    waiting = {
        "status": "waiting_agent",
        "agent": target.slug,
        "execution_id": str(child.id),
        "request_id": str(request_id),
        "deadline": constraints["deadline"],
    }
    return ToolResult(output=waiting, await_run=_await(waiting, deadline))


def _await(waiting: dict[str, Any], deadline: datetime.datetime) -> AwaitRun:
    return AwaitRun(
        execution_id=uuid.UUID(waiting["execution_id"]),
        until=deadline,
        input_request={
            "kind": INPUT_REQUEST_KIND,
            "agent": waiting["agent"],
            "execution_id": waiting["execution_id"],
            "request_id": waiting["request_id"],
            "until": deadline.isoformat(),
        },
    )


def may_delegate_to(caller: Agent, slug: str) -> str | None:
    """Why ``caller`` may not delegate to ``slug`` by its patterns (denied wins, an empty list
    allows none), or ``None`` when it may."""
    denied = next((p for p in caller.denied_delegate_agents if pattern_matches(p, slug)), None)
    if denied is not None:
        return f"delegating to {slug!r} is denied for this agent (pattern {denied!r})"
    if not any(pattern_matches(p, slug) for p in caller.delegate_agents):
        if not caller.delegate_agents:
            return "this agent may not delegate to any agent"
        return f"{slug!r} matches none of the agents this agent may delegate to"
    return None


def _target(caller: Agent, parent: Execution, slug: str) -> Agent:
    """The agent the call names, if this run may hand it work."""
    slug = slug.strip().lower()
    refused = may_delegate_to(caller, slug)
    if refused is not None:
        raise ToolError(
            "agent_not_allowed",
            f"Not delegated: {refused}.",
            agent=slug,
            allowed=list(caller.delegate_agents),
        )
    # Slugs are unique per site: the caller's own site first.
    candidates = sorted(
        Agent.objects.filter(agency_id=parent.agency_id, slug=slug),
        key=lambda a: a.site_id != parent.site_id,
    )
    if not candidates:
        raise ToolError("agent_not_found", f"There is no agent {slug!r} in this agency.")
    target = candidates[0]
    if target.id == caller.id:
        raise ToolError("delegate_to_self", "An agent cannot delegate to itself.")
    if not target.is_active:
        raise ToolError("agent_inactive", f"The agent {slug!r} is not active.")
    return target


def _child_input(instruction: str, input_data: dict[str, Any]) -> str:
    if not input_data:
        return instruction
    return f"{instruction}\n\nInput:\n{json.dumps(input_data, indent=1, ensure_ascii=False)}"


def check_arguments(args: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """The call's agent slug, instruction and input (the JSON Schema checked their types)."""
    slug = args.get("agent")
    instruction = args.get("instruction")
    input_data = args.get("input") or {}
    if not isinstance(slug, str) or not slug.strip():
        raise ToolError("invalid_arguments", "'agent' must be an agent's slug.")
    if not isinstance(instruction, str) or not instruction.strip() or "\x00" in instruction:
        raise ToolError("invalid_arguments", "'instruction' must be a non-empty text.")
    if len(instruction) > INSTRUCTION_MAX_CHARS:
        raise ToolError(
            "invalid_arguments", f"'instruction' is longer than {INSTRUCTION_MAX_CHARS} characters."
        )
    if not isinstance(input_data, dict):
        raise ToolError("invalid_arguments", "'input' must be an object.")
    try:
        size = len(json.dumps(input_data, allow_nan=False))
    except (TypeError, ValueError):
        raise ToolError("invalid_arguments", "'input' must be plain JSON.") from None
    if size > INPUT_MAX_BYTES:
        raise ToolError("invalid_arguments", f"'input' is {size} bytes; at most {INPUT_MAX_BYTES}.")
    instruction = instruction.strip()
    total = len(_child_input(instruction, input_data))  # what the delegated run's input will be
    if total > INPUT_MAX_CHARS:
        raise ToolError(
            "invalid_arguments",
            f"'instruction' and 'input' together make a run input of {total} characters; at "
            f"most {INPUT_MAX_CHARS}. Shorten the instruction or pass less input.",
        )
    return slug, instruction, input_data


# --- the result ---------------------------------------------------------------------------------
def delegation_result(ctx: ToolContext, waiting: dict[str, Any]) -> dict[str, Any] | ToolResult:
    """The waiting call's result when the delegating run resumes: the child's answer, or its
    failure as a tool error; still waiting (a delivery that came early) while it runs."""
    child_id = waiting.get("execution_id")
    child = Execution.objects.filter(pk=child_id).first() if child_id else None
    slug = str(waiting.get("agent", ""))
    if child is None:
        raise ToolError("delegated_run_missing", f"The {slug} agent's run no longer exists.")
    if child.status not in TERMINAL_STATUSES:
        deadline = datetime.datetime.fromisoformat(waiting["deadline"])
        return ToolResult(output=waiting, await_run=_await(waiting, deadline))
    if child.status == ExecutionStatus.COMPLETED:
        return {
            "agent": slug,
            "execution_id": str(child.id),
            "status": child.status,
            **child_answer(child),
        }
    raise ToolError(
        f"delegated_run_{child.status}",
        f"The {slug} agent's run ended {child.get_status_display().lower()}"
        + (f": {child.error[:1000]}" if child.error else "."),
        agent=slug,
        execution_id=str(child.id),
        stop_reason=child.stop_reason,
    )


def child_answer(child: Execution) -> dict[str, Any]:
    """The child's output and result as the parent's context gets them: each capped at
    OUTPUT_MAX_CHARS (a result whose JSON is longer is left out, as an MCP tool's is)."""
    answer: dict[str, Any] = {"output": child.output[:OUTPUT_MAX_CHARS], "result": {}}
    truncated = []
    if len(child.output) > OUTPUT_MAX_CHARS:
        truncated.append("output")
    if child.result:
        if len(json.dumps(child.result, default=str)) <= OUTPUT_MAX_CHARS:
            answer["result"] = child.result
        else:
            truncated.append("result")
    if truncated:
        answer["truncated"] = truncated
    return answer
