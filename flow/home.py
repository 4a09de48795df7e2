"""The staff home's "Stuck runs" panel (live/views.py lists it with the others): runs flagged as
stuck that have not ended yet, longest stuck first."""

from __future__ import annotations

from typing import Any

from agents.models import TERMINAL_STATUSES
from core.models import Agency
from flow.models import StuckRun

PANEL_LIMIT = 10


def stuck_runs(*, agency: Agency, limit: int = PANEL_LIMIT) -> list[StuckRun]:
    """Flags of the agency's runs that are still going (whatever state they are in now)."""
    return list(
        StuckRun.objects.filter(agency=agency)
        .exclude(execution__status__in=TERMINAL_STATUSES)
        .select_related("execution", "agent")
        .order_by("entered_at")[:limit]
    )


def count_stuck(*, agency: Agency) -> int:
    return (
        StuckRun.objects.filter(agency=agency)
        .exclude(execution__status__in=TERMINAL_STATUSES)
        .values("execution_id")
        .distinct()
        .count()
    )


def stuck_panel(agency: Agency) -> dict[str, Any]:
    return {"stuck": stuck_runs(agency=agency), "stuck_count": count_stuck(agency=agency)}
