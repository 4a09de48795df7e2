"""Values PostgreSQL can store as they are.

``text`` and ``jsonb`` refuse the NUL character, and ``jsonb`` refuses NaN and the infinities. A
model's reply, a tool's arguments or a fetched web page may carry them; the runtime writes what
it got, so without this a run would end on a database error instead of going on. NUL becomes
U+FFFD (the replacement character, what a decoder shows for bytes it cannot read) and a
non-finite number becomes null.
"""

from __future__ import annotations

import math
from typing import Any

REPLACEMENT = "\ufffd"


def storable_text(value: str) -> str:
    return value.replace("\x00", REPLACEMENT) if "\x00" in value else value


def storable_json(value: Any) -> Any:
    """``value`` (JSON-like: dicts, lists, strings, numbers) as jsonb takes it."""
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {storable_json(key): storable_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [storable_json(item) for item in value]
    return value
