"""Delegation in a run (its runtime hooks: teams/run_plugin.py): the delegated run's snapshot
narrowed by what its parent passed on, its budget share checked before each model call, and the
delegating run's park."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from agents.models import Agent, Execution, ExecutionStatus
from agents.runtime import store
from agents.runtime.plugins import Park, StepWriter, apply_in_step
from core import tenancy
from teams.services import delegate, ending, expiry, limits
from tools.handlers import AwaitRun

if TYPE_CHECKING:
    from agents.runtime.context import ConfigSnapshot
    from tools.policy import ToolPolicy
    from usage.pricing import Price

# How much of an agent's description the delegate tool's description repeats.
DESCRIPTION_CHARS = 160


def _delegation(execution: Execution) -> dict[str, Any] | None:
    return (execution.initial_context or {}).get("delegation") or None


def narrowed_tools(agent: Agent, execution: Execution, tools: list[ToolPolicy]) -> list[ToolPolicy]:
    """The tools a run is offered: a delegated run only those its parent was offered too (its
    own patterns intersected with the parent's). An agent offered ``delegate_to_agent`` is told
    in its description which agents it may hand work to. ``tools`` is a shared cached list:
    never changed in place."""
    delegation = _delegation(execution)
    if delegation is not None:
        allowed = set(delegation.get("allowed_tools") or [])
        tools = [t for t in tools if t["name"] in allowed]
    if not agent.delegate_agents or all(t["name"] != delegate.TOOL_NAME for t in tools):
        return tools
    team = _team(agent)
    return [
        {**t, "description": f"{t['description']}\n\n{team}"}
        if t["name"] == delegate.TOOL_NAME
        else t
        for t in tools
    ]


def _team(agent: Agent) -> str:
    """The active agents of the agency ``agent`` may delegate to, one line each."""
    lines = []
    others = (
        Agent.objects.filter(agency_id=agent.agency_id, is_active=True)
        .exclude(pk=agent.pk)
        .order_by("slug")
        .values_list("slug", "name", "description")
    )
    for slug, name, description in others:
        if delegate.may_delegate_to(agent, slug) is None:
            about = " ".join(description.split())[:DESCRIPTION_CHARS]
            lines.append(f"- {slug}: {name}" + (f" ({about})" if about else ""))
    if not lines:
        return "No agent is available to delegate to right now."
    return "Agents you may delegate to (pass the slug as 'agent'):\n" + "\n".join(lines)


def narrow(snapshot: ConfigSnapshot, execution: Execution) -> None:
    """A delegated run's limits: no more than its parent's
    (teams.services.limits.child_constraints), and the constraints recorded in its snapshot
    (``delegation``)."""
    delegation = _delegation(execution)
    if delegation is None:
        return
    snapshot["max_steps_per_run"] = min(
        snapshot["max_steps_per_run"], int(delegation["max_steps_per_run"])
    )
    snapshot["max_tool_calls_per_step"] = min(
        snapshot["max_tool_calls_per_step"], int(delegation["max_tool_calls_per_step"])
    )
    snapshot["timeout_seconds"] = min(
        snapshot["timeout_seconds"], int(delegation["timeout_seconds"])
    )
    snapshot["delegation"] = dict(delegation)


@dataclass
class BudgetShare:
    """A delegated run's budget share, for one delivery. Its own spending is on the execution
    in memory; what the runs it delegated to spent is read once, at its first model call of the
    delivery: they end only while it is parked, never while a delivery of it runs."""

    limit: Decimal
    delegated: Decimal | None = None


def budget_share(snapshot: ConfigSnapshot) -> BudgetShare | None:
    """The run's budget share (teams.services.limits.child_constraints), or ``None`` without one."""
    delegation = snapshot.get("delegation")
    cap = delegation.get("max_cost_usd") if delegation else None
    return None if cap is None else BudgetShare(Decimal(cap))


def over_share(
    share: BudgetShare | None,
    execution: Execution,
    snapshot: ConfigSnapshot,
    price: Price,
    input_tokens: int,
) -> str | None:
    """Why the next model call would overspend the delegated run's budget share (the call's
    maximum cost, as the budget reservation counts it, on top of what the run and the runs it
    delegated to spent), or ``None``. One query per delivery, none for a run without a share."""
    if share is None:
        return None
    if share.delegated is None:
        store.settle_in_flight()
        with tenancy.agency_context(execution.agency_id):
            share.delegated = limits.delegated_cost(execution)
    step = price.max_cost(input_tokens=input_tokens, max_output_tokens=snapshot["max_tokens"])
    spent = Decimal(execution.cost_usd) + share.delegated
    if spent + step <= share.limit:
        return None
    return (
        f"The budget share this delegated run was given ({share.limit} USD) is spent: "
        f"{spent} USD so far, and the next model call may cost up to {step} USD."
    )


def park(tx: store.StepTransaction, tool_name: str, awaiting: AwaitRun) -> str:
    """The delegating run parks with ``tx`` (as the runtime applies :func:`park_verdict`)."""
    return apply_in_step(tx, park_verdict(tool_name, awaiting))


def park_verdict(tool_name: str, awaiting: AwaitRun) -> Park:
    """The delegating run waits for the other run, holding no worker, until its deadline."""
    agent = awaiting.input_request.get("agent", "another")

    def check(tx: StepWriter) -> None:
        expiry.schedule_expiry(tx.execution)
        ending.park_check(tx.execution, awaiting.execution_id)  # a child that ended meanwhile

    return Park(
        status=ExecutionStatus.WAITING_AGENT,
        reason=f"{tool_name}: waiting for the {agent} agent's run",
        wait_until=awaiting.until,
        input_request=awaiting.input_request,
        write=check,
    )
