"""The staff home's "Canary versions" card (live/views.py lists it with the other panels): each
running canary of the agency with both arms' live figures. No card when none runs."""

from __future__ import annotations

from typing import Any

from core.models import Agency
from evals.canary_figures import canary_figures, figure_rows
from evals.models import Canary, CanaryStatus

PANEL_LIMIT = 5


def canary_panel(agency: Agency) -> dict[str, Any]:
    running = (
        Canary.objects.filter(agency=agency, status=CanaryStatus.RUNNING)
        .select_related("agent", "candidate", "stable")
        .order_by("-created_at")[:PANEL_LIMIT]
    )
    return {
        "canaries": [
            {"canary": canary, "rows": figure_rows(canary_figures(canary))} for canary in running
        ]
    }
