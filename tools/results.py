"""What a tool's result says beyond its data: that it found nothing (an empty result, or an
error saying the thing looked for is not there), as memory's investigations and flow's loop
detection both judge it; and the note the investigations add to such a result for the model."""

from __future__ import annotations

from typing import Any

# Tool error codes that say the task's object is not there: worth a look, not a retry.
NOT_FOUND_CODES = frozenset({"not_found", "no_results", "does_not_exist", "empty_result"})
# The key of an investigation's note on a result (memory/learning/investigations.py).
NOTE_KEY = "investigate"


def looks_wrong(output: Any) -> str | None:
    """``"empty_result"``, ``"error"`` or None: whether a tool's result deserves a look."""
    if not isinstance(output, dict):
        return "empty_result" if not output else None
    error = output.get("error")
    if error is not None:
        code = error.get("code") if isinstance(error, dict) else None
        return "error" if code in NOT_FOUND_CODES else None
    if not output:
        return "empty_result"
    containers = [v for v in output.values() if isinstance(v, list | dict)]
    if containers and all(len(v) == 0 for v in containers):
        return "empty_result"
    if all(v in (None, "", 0, False) for v in output.values()):
        return "empty_result"
    return None
