"""Completeness analysis of a finished run against its expected workflow (seed 003
``agent_workflow_completeness_analysis``): states visited, missing and unexpected; actions (tool
calls) performed, missing and unexpected; transitions followed; bounds (duration, cost, model
calls); anomalies such as ``skipped_required_step`` and ``infinite_loop``; one score.

The score is the share of the workflow's required items (states, actions with their minimum
count, transitions) the run met; a workflow with none required counts every item it names.
Computed once per run, after it ended (beat: flow.tasks.analyse_finished_runs).
"""

from __future__ import annotations

import datetime
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from agents.models import (
    TERMINAL_STATUSES,
    Agent,
    Execution,
    ExecutionStatus,
    ExecutionStep,
    StateTransition,
    StepType,
)
from core import tenancy
from flow.models import CompletenessAnalysis, ExpectedWorkflow, LoopDetection, workflow_for
from tools.patterns import pattern_matches

ANALYSE_WITHIN = datetime.timedelta(days=1)  # runs that ended longer ago are left alone
CREATED_WITHIN = datetime.timedelta(days=7)  # and runs started longer ago
BATCH = 200


@dataclass
class _Tally:
    met: int = 0
    required: int = 0
    seen: int = 0
    total: int = 0
    anomalies: list[dict[str, str]] = field(default_factory=list)

    def item(self, *, required: bool, met: bool) -> None:
        self.total += 1
        self.seen += met
        if required:
            self.required += 1
            self.met += met

    @property
    def score(self) -> float:
        if self.required:
            return self.met / self.required
        return self.seen / self.total if self.total else 1.0


def analyse(execution: Execution, workflow: ExpectedWorkflow) -> CompletenessAnalysis:
    """The analysis of one ended run (not saved). Precondition: the run's agency context."""
    transitions = list(
        StateTransition.objects.filter(execution_id=execution.pk)
        .order_by("sequence")
        .values_list("from_state", "to_state")
    )
    tools = list(
        ExecutionStep.objects.filter(execution_id=execution.pk, step_type=StepType.ACT)
        .order_by("step_number")
        .values_list("tool_name", "tool_input")
    )
    agent: Agent = execution.agent
    tally = _Tally()

    visited, expected_states, missing_states, unexpected_states = _states(
        workflow, transitions, tally
    )
    names = [name for name, _ in tools]
    counts, missing_actions, performed_expected, unexpected_actions = _actions(
        workflow, names, tally
    )
    followed, unexpected_transitions = _transitions(workflow, transitions, tally)

    _loop_anomalies(execution, agent, transitions, tools, tally)
    duration_ok = _within(execution.duration_ms, workflow.max_duration_ms)
    cost_ok = _within(execution.cost_usd, workflow.max_cost_usd)
    calls_ok = _within(execution.llm_call_count, workflow.max_llm_calls)
    for ok, kind, text in (
        (duration_ok, "timeout", f"The run took {execution.duration_ms} ms"),
        (cost_ok, "over_budget", f"The run cost {execution.cost_usd} USD"),
        (calls_ok, "too_many_llm_calls", f"The run made {execution.llm_call_count} model calls"),
    ):
        if ok is False:
            tally.anomalies.append(
                {"type": kind, "description": f"{text}, over the workflow's bound."}
            )
    conditions_ok = _conditions_met(execution, workflow.success_conditions or {})
    if not conditions_ok:
        tally.anomalies.append(
            {
                "type": "success_condition_failed",
                "description": "The run did not meet the success conditions "
                f"{json.dumps(workflow.success_conditions)}: it ended {execution.status}"
                + (f" ({execution.stop_reason})" if execution.stop_reason else "")
                + ".",
            }
        )
    score = round(max(0.0, min(1.0, tally.score)), 4)
    complete = (
        not missing_states
        and not missing_actions
        and tally.met == tally.required
        and conditions_ok
        and execution.status == ExecutionStatus.COMPLETED
    )
    return CompletenessAnalysis(
        agency_id=execution.agency_id,
        execution=execution,
        agent_id=execution.agent_id,
        workflow=workflow,
        completeness_score=score,
        is_complete=complete,
        expected_states_visited=sum(1 for s in expected_states if s in visited),
        expected_states_total=len(expected_states),
        visited_states=visited,
        missing_states=missing_states,
        unexpected_states_visited=unexpected_states,
        expected_actions_performed=performed_expected,
        expected_actions_total=len(workflow.expected_actions),
        performed_actions=names,
        missing_actions=missing_actions,
        unexpected_actions_performed=unexpected_actions,
        expected_transitions_followed=followed,
        expected_transitions_total=len(workflow.expected_transitions),
        unexpected_transitions=unexpected_transitions,
        duration_within_bounds=duration_ok,
        cost_within_bounds=cost_ok,
        llm_calls_within_bounds=calls_ok,
        anomalies=tally.anomalies,
        analysis_result={
            "workflow": workflow.name,
            "required_met": tally.met,
            "required_total": tally.required,
            "status": execution.status,
            "stop_reason": execution.stop_reason,
            "tool_counts": dict(counts),
        },
        analyzed_at=timezone.now(),
    )


def _states(
    workflow: ExpectedWorkflow, transitions: list[tuple[str, str]], tally: _Tally
) -> tuple[list[str], list[str], list[str], list[str]]:
    """Visited (in order), expected, missing required and unexpected states."""
    visited: list[str] = []
    for _, state in transitions:
        if state not in visited:
            visited.append(state)
    expected_states = [s["state"] for s in workflow.expected_states]
    missing_states: list[str] = []
    for expected in workflow.expected_states:
        met = expected["state"] in visited
        tally.item(required=bool(expected.get("is_required")), met=met)
        if not met and expected.get("is_required"):
            missing_states.append(expected["state"])
            tally.anomalies.append(
                {
                    "type": "skipped_required_step",
                    "description": f"The run never reached the required state {expected['state']}.",
                }
            )
    unexpected_states = [s for s in visited if expected_states and s not in expected_states]

    return visited, expected_states, missing_states, unexpected_states


def _actions(
    workflow: ExpectedWorkflow, names: list[str], tally: _Tally
) -> tuple[Counter[str], list[str], int, list[str]]:
    """Calls per tool, expected actions missing, expected actions performed, unexpected tools."""
    counts = Counter(names)
    missing_actions: list[str] = []
    performed_expected = 0
    matched: set[str] = set()
    for expected in workflow.expected_actions:
        pattern = expected["action"]
        hits = sum(n for name, n in counts.items() if pattern_matches(pattern, name))
        matched |= {name for name in counts if pattern_matches(pattern, name)}
        required = bool(expected.get("is_required"))
        least = int(expected.get("min_count") or (1 if required else 0))
        met = hits >= max(least, 1) if required else hits >= least and hits > 0
        tally.item(required=required or least > 0, met=met)
        performed_expected += hits > 0
        if hits < least:
            missing_actions.append(pattern)
            tally.anomalies.append(
                {
                    "type": "skipped_required_step" if required else "missing_action",
                    "description": f"The required step {pattern} was skipped."
                    if hits == 0
                    else f"{pattern} ran {hits} time(s), at least {least} expected.",
                }
            )
        most = expected.get("max_count")
        if most is not None and hits > int(most):
            tally.anomalies.append(
                {
                    "type": "too_many_actions",
                    "description": f"{pattern} ran {hits} times, at most {most} expected.",
                }
            )
    unexpected_actions = sorted(
        {name for name in names if workflow.expected_actions and name not in matched}
    )

    return counts, missing_actions, performed_expected, unexpected_actions


def _transitions(
    workflow: ExpectedWorkflow, transitions: list[tuple[str, str]], tally: _Tally
) -> tuple[int, list[str]]:
    """Expected transitions followed, and the transitions the workflow does not expect."""
    pairs = [(a, b) for a, b in transitions if a]
    seen_pairs = set(pairs)
    followed = 0
    for expected in workflow.expected_transitions:
        pair = (expected["from"], expected["to"])
        met = pair in seen_pairs
        followed += met
        tally.item(required=bool(expected.get("is_required")), met=met)
        if not met and expected.get("is_required"):
            tally.anomalies.append(
                {
                    "type": "missing_transition",
                    "description": f"The required transition {pair[0]} -> {pair[1]} "
                    "did not happen.",
                }
            )
    expected_pairs = {(t["from"], t["to"]) for t in workflow.expected_transitions}
    unexpected_transitions = sorted(
        {f"{a}->{b}" for a, b in seen_pairs if expected_pairs and (a, b) not in expected_pairs}
    )
    return followed, unexpected_transitions


def _loop_anomalies(
    execution: Execution,
    agent: Agent,
    transitions: list[tuple[str, str]],
    tools: list[tuple[str, Any]],
    tally: _Tally,
) -> None:
    """Seed 003's infinite loops: a state entered again and again (the same state sequence), or
    the same call repeated past the agent's loop threshold (caught while it ran or not)."""
    threshold = agent.loop_threshold or 0
    if not threshold:
        return
    entered = Counter(state for _, state in transitions)
    for state, times in entered.items():
        if times > threshold + 1:  # running is entered once per claim: first + resumes
            tally.anomalies.append(
                {
                    "type": "infinite_loop",
                    "description": f"The run entered {state} {times} times.",
                }
            )
    calls = Counter(
        (name, json.dumps(arguments, sort_keys=True, default=str)) for name, arguments in tools
    )
    for (name, _), times in calls.items():
        if times > threshold:
            tally.anomalies.append(
                {
                    "type": "infinite_loop",
                    "description": f"{name} was called {times} times with the same arguments.",
                }
            )
    caught = LoopDetection.objects.filter(execution_id=execution.pk).exclude(outcome="warned")
    if caught.exists() and not any(a["type"] == "infinite_loop" for a in tally.anomalies):
        tally.anomalies.append(
            {"type": "infinite_loop", "description": "Loop detection stopped or paused the run."}
        )


def _within(value: Any, bound: Any) -> bool | None:
    if bound is None or value is None:
        return None
    return bool(value <= bound)


def _conditions_met(execution: Execution, conditions: dict[str, Any]) -> bool:
    """``status`` and ``stop_reason`` (a value or a list of values) as the run ended."""
    for key in ("status", "stop_reason"):
        wanted = conditions.get(key)
        if wanted is None:
            continue
        allowed = wanted if isinstance(wanted, list) else [wanted]
        if getattr(execution, key) not in allowed:
            return False
    return True


def analyse_and_save(execution_id: Any) -> CompletenessAnalysis | None:
    """Analyse one ended run with its agent's workflow, once. Precondition: its agency context."""
    execution = Execution.objects.select_related("agent").filter(pk=execution_id).first()
    if execution is None or execution.status not in TERMINAL_STATUSES:
        return None
    workflow = workflow_for(execution.agent)
    if workflow is None:
        return None
    analysis = analyse(execution, workflow)
    try:
        with transaction.atomic():
            analysis.save()
    except IntegrityError:  # analysed meanwhile (two sweeps): the first one stands
        return CompletenessAnalysis.objects.filter(execution_id=execution.pk).first()
    return analysis


def due_for_analysis(*, agency_id: Any, now: datetime.datetime) -> list[Any]:
    """Ids of the agency's runs that ended lately, have no analysis yet and whose agent has an
    active workflow. Through the agency's runs by date (an index), not every run's status.
    Precondition: the agency's context."""
    workflows = ExpectedWorkflow.objects.filter(
        agency_id=OuterRef("agency_id"), is_active=True
    ).filter(
        Q(agent_id=OuterRef("agent_id"))
        | Q(agent__isnull=True, agent_type=OuterRef("agent__agent_type"))
    )
    return list(
        Execution.objects.filter(
            agency_id=agency_id,
            created_at__gte=now - CREATED_WITHIN,
            status__in=TERMINAL_STATUSES,
            completed_at__gte=now - ANALYSE_WITHIN,
        )
        .filter(~Exists(CompletenessAnalysis.objects.filter(execution_id=OuterRef("pk"))))
        .filter(Exists(workflows))
        .order_by("completed_at")
        .values_list("id", flat=True)[:BATCH]
    )


def analyse_finished(*, now: datetime.datetime | None = None) -> int:
    """Beat: every agency with an active workflow, its runs due for analysis."""
    now = now or timezone.now()
    with tenancy.platform_context():
        agencies = list(
            ExpectedWorkflow.objects.filter(is_active=True)
            .order_by()
            .values_list("agency_id", flat=True)
            .distinct()
        )
    done = 0
    for agency_id in agencies:
        with tenancy.agency_context(agency_id):
            due = due_for_analysis(agency_id=agency_id, now=now)
        for execution_id in due:
            with tenancy.agency_context(agency_id):
                done += analyse_and_save(execution_id) is not None
    return done
