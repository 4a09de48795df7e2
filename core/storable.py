"""Values PostgreSQL can store as they are.

``text`` and ``jsonb`` refuse the NUL character and unpaired UTF-16 surrogates (which JSON's
``\\ud800`` escapes produce), and ``jsonb`` refuses NaN and the infinities. A request, a model's
reply, a tool's arguments or a fetched web page may carry them. Input that is checked is refused
with a reason (:func:`unstorable`: the API, a tool call's arguments); what the runtime must write
as it came is made storable: NUL and surrogates become U+FFFD (the replacement character, what a
decoder shows for what it cannot read) and a non-finite number becomes null.
"""

from __future__ import annotations

import math
import re
from typing import Any

REPLACEMENT = "\ufffd"
MAX_DEPTH = 32
_SURROGATE = re.compile("[\ud800-\udfff]")


def unstorable(value: Any) -> str | None:
    """Why ``value`` (parsed JSON) cannot be stored as text/jsonb, or None when it can."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            return f"JSON nested deeper than {MAX_DEPTH} levels is not accepted."
        if isinstance(item, dict):
            stack.extend((key, depth + 1) for key in item)
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)
        elif isinstance(item, str):
            if "\x00" in item:
                return "Text containing NUL characters (\\u0000) cannot be stored."
            if not item.isascii() and _SURROGATE.search(item):
                return "Text containing unpaired UTF-16 surrogates cannot be stored."
        elif isinstance(item, float) and not math.isfinite(item):
            return "Numbers must be finite."
    return None


def storable_text(value: str) -> str:
    """``value`` with NUL and unpaired surrogates replaced; ``value`` itself when it has none."""
    if "\x00" in value:
        value = value.replace("\x00", REPLACEMENT)
    if not value.isascii() and _SURROGATE.search(value):
        value = _SURROGATE.sub(REPLACEMENT, value)
    return value


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
