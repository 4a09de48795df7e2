"""Learning on the admin's pages: a run's quality (its signals, the judge, the mark and the links
to mark it), the patterns it was given or taught and its investigations; an agent's quality per
day."""

from __future__ import annotations

import datetime
from typing import Any

from django.db.models import Avg, Count, Q
from django.db.models.functions import TruncDate
from django.template.loader import render_to_string
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from django.utils.safestring import SafeString

from agents.models import Agent, Execution
from memory.learning.models import HumanMark, Investigation, LearnedPattern, PatternUse, RunQuality

AGENT_DAYS = 30


def _url(name: str, *args: Any) -> str:
    try:
        return reverse(name, args=args)
    except NoReverseMatch:  # (not registered: a test's admin site)
        return ""


def quality_panel(execution: Execution) -> SafeString:
    """The run's quality row (or why there is none yet) and what learning did with it."""
    row = (
        RunQuality.objects.filter(execution_id=execution.pk)
        .select_related("pattern", "marked_by")
        .first()
    )
    signals = []
    if row is not None:
        signals = [
            {"name": name, **values, "percent": round(values["value"] * 100)}
            for name, values in (row.signals or {}).items()
        ]
    given = list(PatternUse.objects.filter(execution_id=execution.pk).select_related("pattern"))
    context = {
        "row": row,
        "signals": signals,
        "percent": round(row.score * 100) if row is not None else None,
        "ended": execution.is_terminal,
        "given": given,
        "investigations": list(Investigation.objects.filter(execution_id=execution.pk)),
        "mark_good_url": _url("admin:memory_runquality_mark", execution.pk, HumanMark.GOOD),
        "mark_bad_url": _url("admin:memory_runquality_mark", execution.pk, HumanMark.BAD),
    }
    return SafeString(render_to_string("memory/learning/quality_panel.html", context))


def agent_quality_days(agent: Agent, *, days: int = AGENT_DAYS) -> list[dict[str, Any]]:
    """Per day (newest first) of the last ``days``: runs scored, mean score, runs judged good
    by the threshold, marks good and bad."""
    since = timezone.now() - datetime.timedelta(days=days)
    rows = (
        RunQuality.objects.filter(agent_id=agent.pk, scored_at__gte=since)
        .annotate(day=TruncDate("scored_at"))
        .order_by()
        .values("day")
        .annotate(
            runs=Count("pk"),
            mean=Avg("score"),
            above=Count("pk", filter=Q(score__gte=float(agent.quality_threshold))),
            good=Count("pk", filter=Q(human_mark=HumanMark.GOOD)),
            bad=Count("pk", filter=Q(human_mark=HumanMark.BAD)),
        )
        .order_by("-day")
    )
    return [{**row, "score_percent": round((row["mean"] or 0) * 100)} for row in rows]


def agent_quality_panel(agent: Agent) -> SafeString:
    """The agent's quality over the last days, and its learned patterns."""
    patterns = LearnedPattern.objects.filter(agent_id=agent.pk)
    context = {
        "agent": agent,
        "days": agent_quality_days(agent),
        "window": AGENT_DAYS,
        "patterns": patterns.count(),
        "active_patterns": patterns.filter(is_active=True).count(),
        "patterns_url": _url("admin:memory_learnedpattern_changelist"),
        "qualities_url": _url("admin:memory_runquality_changelist"),
        "investigations": Investigation.objects.filter(
            agent_id=agent.pk, created_at__gte=timezone.now() - datetime.timedelta(days=AGENT_DAYS)
        ).count(),
        "threshold_percent": round(float(agent.quality_threshold) * 100),
    }
    return SafeString(render_to_string("memory/learning/agent_panel.html", context))
