"""What the run page's live view (live/templates/live/execution_live.html, drawn by
live/static/live/execution.js) needs besides the run's row: the labels it names a status with as
the run moves on, and the links it puts on the timeline's steps (panels.RUN_STEP_ACTIONS)."""

from __future__ import annotations

from typing import Any

from agents.admin import panels
from agents.models import Execution, ExecutionStatus


def run_page_context(*, execution: Execution, may_write: bool) -> dict[str, Any]:
    return {
        "run_status_labels": {value: str(label) for value, label in ExecutionStatus.choices},
        "run_step_actions": [
            action.as_json(execution)
            for action in panels.RUN_STEP_ACTIONS
            if may_write or not action.needs_write
        ],
    }
