"""Delegation between agents: the delegated run's start (the ``delegate_to_agent`` call), its end
resuming the run that waits for it, the cancel cascade and the wait's expiry.

What a delegated run may do is decided once, when it is started, from the run that delegates
(its "parent"), and kept in the child's ``initial_context["delegation"]`` (it survives every
redelivery; the child's first claim narrows its snapshot with it, teams/runtime.py):

- tools: only those the parent was offered (the child's own patterns, intersected);
- limits: ``max_steps_per_run`` and ``max_tool_calls_per_step`` no more than the parent's,
  ``timeout_seconds`` no more than the parent's remaining running time;
- deadline: the parent's wait expires when its remaining time is up (the parent then times out
  and its children are cancelled), so the child never outlives the parent's deadline;
- budget: at most AGENTDESK_DELEGATION_BUDGET_SHARE of what the parent may still spend (its own
  share if it is a delegated run, and the agency's daily budget left); no cap when neither is
  set.

Locks: the parent's row before the child's (the wait's expiry and a cancel of the parent lock the
parent, then each child), and never the other way round. A child's end is often decided by
someone who holds the child's row already (an approval's deny or expiry, a question's stop, stuck
detection), so it takes no lock on its parent and writes nothing that points at it (a row with a
foreign key to the parent would lock it too, at commit): it queues ``teams.resume_parent``, which
locks the parent alone, records the answer and resumes the parent if it still waits for this
child. A parent that parks locks its own row first and then reads its child's status, so a child
that ended before the park commits is seen by one or the other. The one exception is the cancel
cascade: the transaction that ends the parent holds its row, and records its children's answers
at once.
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime
import json
import logging
import uuid
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from agents import lifecycle
from agents.models import (
    INPUT_MAX_CHARS,
    TERMINAL_STATUSES,
    Agent,
    AgentMessage,
    Execution,
    ExecutionStatus,
    MessageChannel,
    MessageType,
    StateTransition,
    StopReason,
    TriggerType,
)
from agents.services import (
    execution_cancel,
    execution_create,
    execution_resume,
    skipped_trigger,
)
from core.sending import send_task_on_commit
from tools.handlers import AwaitRun, ToolContext, ToolError, ToolResult
from tools.patterns import pattern_matches
from usage.models import Budget, today

logger = logging.getLogger(__name__)

TOOL_NAME = "delegate_to_agent"
RESUME_TASK = "teams.resume_parent"  # a delegated run's end, resuming the run waiting for it
INPUT_REQUEST_KIND = "agent"  # Execution.input_request["kind"] of a run waiting for another
INSTRUCTION_MAX_CHARS = 8000
INPUT_MAX_BYTES = 10_000
# What a delegated run's answer may bring back into the delegating run's context.
OUTPUT_MAX_CHARS = 20_000
COST_QUANTUM = Decimal("0.000001")

# Runs being ended right now by this thread: their children's ends must not resume them.
_ending: contextvars.ContextVar[frozenset[uuid.UUID]] = contextvars.ContextVar(
    "teams_ending", default=frozenset()
)


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
    constraints = _constraints(parent, target, now=now)
    request_id = uuid.uuid4()
    message_id = uuid.uuid4()
    queue = _delivery_queue()
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


# --- what the child may do ----------------------------------------------------------------------
def _constraints(parent: Execution, target: Agent, *, now: datetime.datetime) -> dict[str, Any]:
    snapshot = parent.config_snapshot or {}
    remaining = remaining_seconds(parent, now=now)
    if remaining < 1:
        raise ToolError("no_time_left", "This run has no time left to wait for another agent.")
    cap = _budget_share(parent)
    if cap is not None and cap <= 0:
        raise ToolError(
            "no_budget_left", "This run has no budget left to share with another agent."
        )
    timeout = min(target.timeout_seconds, int(remaining))
    return {
        "allowed_tools": sorted(t["name"] for t in snapshot.get("tools", [])),
        "max_steps_per_run": min(
            target.max_steps_per_run, int(snapshot.get("max_steps_per_run", 10**6))
        ),
        "max_tool_calls_per_step": min(
            target.max_tool_calls_per_step, int(snapshot.get("max_tool_calls_per_step", 10**6))
        ),
        "timeout_seconds": max(1, timeout),
        "deadline": (now + datetime.timedelta(seconds=remaining)).isoformat(),
        "max_cost_usd": None if cap is None else str(cap),
        "budget_share": settings.AGENTDESK_DELEGATION_BUDGET_SHARE,
    }


def remaining_seconds(execution: Execution, *, now: datetime.datetime) -> float:
    """What is left of the running run's ``timeout_seconds``: its time in ``running`` (the state
    it is in included, up to ``now``); time spent waiting does not count."""
    limit = float((execution.config_snapshot or {}).get("timeout_seconds", 0))
    used = 0.0
    for state, entered, exited in StateTransition.objects.filter(
        execution_id=execution.id
    ).values_list("to_state", "entered_at", "exited_at"):
        if state == ExecutionStatus.RUNNING:
            used += ((exited or now) - entered).total_seconds()
    return limit - used


def _budget_share(parent: Execution) -> Decimal | None:
    """The cap of a run the parent delegates to: a share of what the parent may still spend."""
    left: list[Decimal] = []
    own = ((parent.config_snapshot or {}).get("delegation") or {}).get("max_cost_usd")
    if own is not None:
        left.append(Decimal(own) - spent_by(parent))
    budget = Budget.objects.filter(agency_id=parent.agency_id).order_by("-date").first()
    if budget is not None:  # today's, or the latest limit today's row will be made from
        left.append(budget.remaining_usd if budget.date == today() else budget.limit_usd)
    if not left:
        return None
    share = Decimal(str(settings.AGENTDESK_DELEGATION_BUDGET_SHARE))
    return (max(Decimal(0), min(left)) * share).quantize(COST_QUANTUM)


_SUBTREE_COST_SQL = """
WITH RECURSIVE tree AS (
    SELECT id, cost_usd FROM agents_execution WHERE parent_id = %s AND trigger_type = 'agent'
    UNION ALL
    SELECT e.id, e.cost_usd FROM agents_execution e JOIN tree ON e.parent_id = tree.id
    WHERE e.trigger_type = 'agent'
)
SELECT coalesce(sum(cost_usd), 0) FROM tree
"""


def spent_by(execution: Execution) -> Decimal:
    """What the run and the runs it delegated to (all the way down) have cost so far.
    Precondition: its agency context."""
    return Decimal(execution.cost_usd) + delegated_cost(execution)


def delegated_cost(execution: Execution) -> Decimal:
    """What the runs ``execution`` delegated to (all the way down) have cost so far.
    Precondition: its agency context."""
    with connection.cursor() as cursor:
        cursor.execute(_SUBTREE_COST_SQL, [execution.id])
        row = cursor.fetchone()
    return Decimal(row[0] if row else 0)


def _delivery_queue() -> str | None:
    """The queue of the Celery delivery running the calling run: its team runs there too (and
    it resumes there), so a worker pool given to a team keeps it. None outside a task."""
    from celery import current_task  # noqa: PLC0415

    request = getattr(current_task, "request", None)
    info = getattr(request, "delivery_info", None) or {}
    queue = info.get("routing_key")
    return str(queue) if queue else None


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
            **_answer(child),
        }
    raise ToolError(
        f"delegated_run_{child.status}",
        f"The {slug} agent's run ended {child.get_status_display().lower()}"
        + (f": {child.error[:1000]}" if child.error else "."),
        agent=slug,
        execution_id=str(child.id),
        stop_reason=child.stop_reason,
    )


def _answer(child: Execution) -> dict[str, Any]:
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


# --- a run's end --------------------------------------------------------------------------------
def run_ended(execution: Execution) -> None:
    """Called as a run ends (by teams.run_ended, a run-ended listener: in the transaction that
    ends it, the row's new status set but not yet written). A run that did not complete cancels
    the runs it delegated to that still go on; a delegated run answers its parent (see
    :func:`_answer_parent`).
    """
    if execution.status != ExecutionStatus.COMPLETED:
        cancel_children(execution)
    delegation = (execution.initial_context or {}).get("delegation")
    if delegation and execution.parent_id is not None:
        _answer_parent(execution, delegation)


@contextlib.contextmanager
def _parent_ending(execution_id: uuid.UUID) -> Iterator[None]:
    token = _ending.set(_ending.get() | {execution_id})
    try:
        yield
    finally:
        _ending.reset(token)


def cancel_children(execution: Execution) -> int:
    """Cancel the delegated runs of ``execution`` that have not ended (each cancels its own in
    turn): those waiting or pending end now, a running one at its next step. Precondition: the
    transaction that ends ``execution`` (execution_cancel locks its row before each child's)."""
    children = list(
        Execution.objects.filter(parent_id=execution.id, trigger_type=TriggerType.AGENT)
        .exclude(status__in=TERMINAL_STATUSES)
        .order_by("created_at")
    )
    with _parent_ending(execution.id):
        for child in children:
            execution_cancel(
                execution=child,
                reason=f"The run that delegated to it ended ({execution.status}).",
            )
    return len(children)


def _answer_parent(child: Execution, delegation: dict[str, Any]) -> None:
    """The delegated run's end, in its transaction, which may hold the child's row already:
    nothing here locks or points at the parent (see the module's docstring on locks). The answer
    is recorded, and the parent resumed, by ``teams.resume_parent`` once this commits; unless
    the parent is being ended by this very transaction (the cancel cascade), which holds its row:
    then the answer is recorded now and nothing resumes."""
    if child.parent_id in _ending.get():
        parent = Execution.objects.filter(pk=child.parent_id).first()
        _record_answer(child, delegation, parent=parent)
        return
    _send_resume(child.id, agency_id=child.agency_id, queue=delegation.get("queue"))


def _send_resume(child_id: uuid.UUID, *, agency_id: uuid.UUID, queue: str | None) -> None:
    """Once the transaction commits, ``teams.resume_parent`` for the ended child, on the queue
    its parent runs on. A failed send is logged: the parent then waits until its deadline."""
    send_task_on_commit(
        RESUME_TASK,
        child_id,
        agency_id=agency_id,
        queue=queue,
        about=f"execution {child_id}",
        then="its parent waits until its deadline",
    )


def parent_resume(*, child: Execution) -> bool:
    """The ended delegated run ``child`` answers its parent: the result message (once), and the
    parent resumed if it still waits for this child (decided on the parent's locked row, so
    exactly once however many deliveries race). Locks the parent's row only. True if it resumed
    the parent. Precondition: agency context, ``child`` ended and committed."""
    delegation = (child.initial_context or {}).get("delegation")
    if not delegation or child.parent_id is None or child.status not in TERMINAL_STATUSES:
        return False
    with transaction.atomic():
        parent = Execution.objects.select_for_update().filter(pk=child.parent_id).first()
        _record_answer(child, delegation, parent=parent)
        if (
            parent is None
            or parent.status != ExecutionStatus.WAITING_AGENT
            or (parent.input_request or {}).get("execution_id") != str(child.id)
        ):
            return False  # it ended or moved on: nothing waits for this result
        slug = child.agent.slug if child.agent_id else "delegated"
        execution_resume(
            execution=parent,
            observation=None,
            reason=f"the {slug} agent's run ended ({child.status})",
            queue=delegation.get("queue"),
        )
        return True


def park_check(parent: Execution, child_id: uuid.UUID) -> None:
    """``parent`` parks to wait for ``child_id``: a child that ended before the park commits
    (its resume found the parent still running) would never resume it, so the parent's row is
    locked first, and then the child's status read; an ended child gets its resume queued again
    (it runs after the park commits). Precondition: the parent's step transaction."""
    list(Execution.objects.select_for_update().filter(pk=parent.id).values_list("pk", flat=True))
    # A statement of its own, after the lock: it sees every child's end committed before it.
    child = Execution.objects.filter(pk=child_id).values_list("status", "initial_context").first()
    if child is None or child[0] not in TERMINAL_STATUSES:
        return
    delegation = (child[1] or {}).get("delegation") or {}
    _send_resume(child_id, agency_id=parent.agency_id, queue=delegation.get("queue"))


def _record_answer(
    child: Execution, delegation: dict[str, Any], *, parent: Execution | None
) -> None:
    """The child's result message to its parent, once; the request marked responded.
    Precondition: the parent's row locked by this transaction (the message points at it)."""
    if AgentMessage.objects.filter(from_execution=child, is_request=False).exists():
        return
    now = timezone.now()
    request_message = str(delegation.get("request_message_id") or "")
    request = AgentMessage.objects.filter(pk=request_message).first() if request_message else None
    completed = child.status == ExecutionStatus.COMPLETED
    AgentMessage.objects.create(
        agency_id=child.agency_id,
        from_execution=child,
        to_execution=parent,
        from_agent_id=child.agent_id,
        to_agent_id=parent.agent_id if parent else delegation.get("parent_agent_id"),
        message_type=MessageType.RESULT if completed else MessageType.ERROR_NOTIFICATION,
        content={
            "status": child.status,
            "stop_reason": child.stop_reason,
            **_answer(child),
            "error": child.error[:4000],
            "cost_usd": str(child.cost_usd),
            "steps": child.llm_call_count,
        },
        is_request=False,
        request_id=request.request_id if request else delegation.get("request_id"),
        in_response_to=request,
        channel=MessageChannel.TASK_QUEUE,
        sent_at=child.completed_at or now,
        received_at=now if parent is not None else None,
    )
    if request is not None:
        request.received_at = request.received_at or child.started_at
        request.responded_at = now
        request.save(update_fields=["received_at", "responded_at", "updated_at"])


# --- the wait's expiry --------------------------------------------------------------------------
def wait_expire(execution: Execution, *, now: datetime.datetime) -> bool:
    """End a run still waiting for another agent past its deadline: it times out, and the runs
    it waits for are cancelled. False when it moved on first. Precondition: agency context."""
    with transaction.atomic():
        locked = Execution.objects.select_for_update().get(pk=execution.pk)
        if (
            locked.status != ExecutionStatus.WAITING_AGENT
            or locked.wait_until is None
            or locked.wait_until > now
        ):
            return False
        agent = (locked.input_request or {}).get("agent", "another agent")
        # Its delegate_to_agent call is cancelled with it (approvals' run-ended listener).
        lifecycle.finish_execution(
            locked,
            status=ExecutionStatus.TIMED_OUT,
            stop_reason=StopReason.TIMEOUT,
            error=f"Reached its deadline ({locked.wait_until:%Y-%m-%d %H:%M:%S} UTC) while "
            f"waiting for the {agent} agent's run.",
        )
        locked.save()
        return True


def schedule_expiry(execution: Execution) -> None:
    """Once the park commits, a delayed message for the wait's deadline (beat's sweep,
    teams.expire_waits, ends any whose message is lost or too far ahead for the broker)."""
    until = execution.wait_until
    if until is None:
        return
    if (until - timezone.now()).total_seconds() > settings.AGENTDESK_PRECISE_WAKE_MAX_SECONDS:
        return
    send_task_on_commit(
        "teams.expire_wait",
        execution.id,
        agency_id=execution.agency_id,
        eta=until + datetime.timedelta(milliseconds=200),
        about=f"execution {execution.id}",
        then="beat's sweep (teams.expire_waits) ends the wait",
    )
