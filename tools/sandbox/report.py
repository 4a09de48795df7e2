"""The runner's report (tools/sandbox/runner.py: JSON, from its result pipe or after the marker in
a pod's log) made a :class:`SandboxResult`, the same way for every executor."""

from __future__ import annotations

import base64
from typing import Any

from tools.sandbox.base import SandboxLimits, SandboxResult, Status, Table


def from_report(report: dict[str, Any], *, limits: SandboxLimits, **common: Any) -> SandboxResult:
    """``common``: what the executor measured itself (stdout, stderr, cpu and wall seconds); the
    runner's CPU figure replaces a smaller one of the executor's."""
    common["cpu_seconds"] = round(
        max(common.get("cpu_seconds", 0.0), float(report.get("cpu_seconds", 0.0))), 3
    )
    if report.get("output_limit"):
        error = "killed: the script wrote more output than the sandbox keeps"
        return SandboxResult(status="output_limit", error=error, **common)
    table = report.get("table")
    error = str(report.get("error", ""))
    status: Status = "ok"
    if report.get("memory"):
        status = "memory_limit"
        error += f" (memory limit: {limits.memory_mb} MB)"
    elif error:
        status = "error"
    return SandboxResult(
        status=status,
        error=error,
        table=Table(
            columns=table["columns"],
            rows=table["rows"],
            row_count=table["row_count"],
            truncated=table["row_count"] > len(table["rows"]),
        )
        if table
        else None,
        value=report.get("value"),
        charts=[base64.b64decode(c) for c in report.get("charts", [])],
        **common,
    )
