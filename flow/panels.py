"""Flow analysis on the admin's pages: a run's completeness analysis (and the loops and stuck
flags it had), and an agent's analyses over the last days."""

from __future__ import annotations

import datetime
from collections import Counter
from typing import Any

from django.db.models import Avg, Count, Q
from django.db.models.functions import TruncDate
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import SafeString

from agents.models import Agent, Execution
from flow.models import CompletenessAnalysis, LoopDetection, StuckRun, workflow_for

AGENT_DAYS = 14


def completeness_panel(execution: Execution) -> SafeString:
    """The run's analysis (or why there is none yet), its loops and its stuck flags."""
    analysis = (
        CompletenessAnalysis.objects.filter(execution_id=execution.pk)
        .select_related("workflow")
        .first()
    )
    workflow = None if analysis is not None else workflow_for(execution.agent)
    context: dict[str, Any] = {
        "analysis": analysis,
        "workflow": workflow,
        "ended": execution.is_terminal,
        "loops": list(LoopDetection.objects.filter(execution_id=execution.pk)),
        "stuck": list(StuckRun.objects.filter(execution_id=execution.pk)),
        "workflows_url": reverse("admin:flow_expectedworkflow_changelist"),
    }
    return SafeString(render_to_string("flow/completeness_panel.html", context))


def agent_days(agent: Agent, *, days: int = AGENT_DAYS) -> list[dict[str, Any]]:
    """Per day (newest first) of the last ``days``: runs analysed, mean score, complete runs,
    and the step most often missing."""
    since = timezone.now() - datetime.timedelta(days=days)
    analyses = CompletenessAnalysis.objects.filter(agent_id=agent.pk, analyzed_at__gte=since)
    rows: list[dict[str, Any]] = [
        dict(row)
        for row in analyses.annotate(day=TruncDate("analyzed_at"))
        .order_by()
        .values("day")
        .annotate(
            runs=Count("pk"),
            score=Avg("completeness_score"),
            complete=Count("pk", filter=Q(is_complete=True)),
        )
        .order_by("-day")
    ]
    missing: dict[datetime.date, Counter[str]] = {}
    for day, steps, states in analyses.annotate(day=TruncDate("analyzed_at")).values_list(
        "day", "missing_actions", "missing_states"
    ):
        missing.setdefault(day, Counter()).update([*steps, *states])
    for row in rows:
        common = missing.get(row["day"], Counter()).most_common(1)
        row["most_missing"] = f"{common[0][0]} ({common[0][1]})" if common else ""
        row["score_percent"] = round((row["score"] or 0) * 100)
    return rows


def flow_panel(agent: Agent) -> SafeString:
    """The agent's flow over the last days: completeness per day, loops and stuck runs."""
    since = timezone.now() - datetime.timedelta(days=AGENT_DAYS)
    context = {
        "days": agent_days(agent),
        "window": AGENT_DAYS,
        "workflow": workflow_for(agent),
        "loops": LoopDetection.objects.filter(agent_id=agent.pk, detected_at__gte=since)
        .exclude(outcome="warned")
        .count(),
        "stuck": StuckRun.objects.filter(agent_id=agent.pk, flagged_at__gte=since).count(),
        "workflows_url": reverse("admin:flow_expectedworkflow_changelist"),
    }
    return SafeString(render_to_string("flow/agent_panel.html", context))
