"""A tool as a run's configuration snapshot holds it: what agents.runtime.setup decided when the
run started, and what the tool executor checks each call against (tools/executor.py)."""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict


class ToolPolicy(TypedDict):
    """A tool as the run's config snapshot holds it (decided when the run started)."""

    name: str
    description: str
    parameters: dict[str, Any]
    tool_id: NotRequired[str]
    dangerous: NotRequired[bool]
    rate_limit_per_minute: NotRequired[int | None]
    rate_limit_per_hour: NotRequired[int | None]
    # Checked at every call against the agency's enabled modules. Absent in snapshots taken
    # before modules were enforced: those runs keep what they started with.
    requires_modules: NotRequired[list[str]]
