"""An agent's allowed/denied tool-name patterns (``Agent.allowed_tools`` / ``denied_tools``).

Semantics (seed 004's ``getAvailableTools`` and ``PermissionChecker``, generalised as the tools
issue asks):

- A pattern is a tool name in which ``*`` stands for any run of characters, including none:
  ``crm_*``, ``*_send``, ``crm_*_contact``, ``*``. The seed only supported a trailing ``*``; every
  pattern it accepts means the same thing here.
- A name is available when it matches at least one allowed pattern and no denied pattern: **denied
  wins**. The seed matched denied names exactly; here they take wildcards too (``email_*``).
- **An empty allowed list allows nothing** (the seed's ``allowedTools.some(...)`` over an empty list
  is false, and the column defaults to ``'{}'``). Least privilege: an agent with no allowed tools
  still answers, it just cannot act. Use ``["*"]`` for "every tool".

Patterns are validated when written (API serializers, admin forms) with :func:`validate_pattern` /
:func:`validate_patterns`. Matching is deliberately forgiving of rows written before validation
existed: it strips and lower-cases a pattern (tool names are lower case) and treats every character
other than ``*`` literally, so a malformed pattern matches at most what it literally says.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

__all__ = [
    "MAX_PATTERN_LENGTH",
    "InvalidPattern",
    "PatternDecision",
    "decide",
    "pattern_matches",
    "validate_pattern",
    "validate_patterns",
]

# Tool names are function names for the LLM APIs, which cap them at 64 characters.
MAX_PATTERN_LENGTH = 64
# validate_pattern's rules as one expression, for the API schema (with a length of 1 to 64).
PATTERN_REGEX = r"^\*?(?:[a-z0-9_]+\*)*[a-z0-9_]*$"
PATTERN_SCHEMA = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_PATTERN_LENGTH,
    "pattern": PATTERN_REGEX,
}
_ALLOWED_CHARACTERS = re.compile(r"[a-z0-9_*]+")


class InvalidPattern(ValueError):
    """A tool pattern that cannot be stored. ``str(exc)`` is a message fit for a form field."""

    def __init__(
        self,
        message: str,
        *,
        pattern: str,
        index: int | None = None,
        messages: Sequence[str] = (),
    ) -> None:
        super().__init__(message)
        self.message = message
        self.pattern = pattern
        self.index = index  # position in the list, set by validate_patterns
        # Each bad entry's own message, in order (validate_patterns): a list field's errors.
        self.messages = tuple(messages) or (message,)


def validate_pattern(pattern: str) -> None:
    """Raise :class:`InvalidPattern` unless ``pattern`` is a well-formed tool pattern."""
    if not isinstance(pattern, str):
        raise InvalidPattern("A tool pattern must be a string.", pattern=repr(pattern))
    if pattern.strip() == "":
        raise InvalidPattern("A tool pattern cannot be empty.", pattern=pattern)
    if pattern != pattern.strip() or any(ch.isspace() for ch in pattern):
        raise InvalidPattern(
            f"Tool pattern {pattern!r} contains whitespace; remove the spaces.", pattern=pattern
        )
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise InvalidPattern(
            f"Tool pattern {pattern[:20]!r}... is {len(pattern)} characters long; "
            f"the maximum is {MAX_PATTERN_LENGTH}.",
            pattern=pattern,
        )
    if not _ALLOWED_CHARACTERS.fullmatch(pattern):
        bad = sorted({ch for ch in pattern if not _ALLOWED_CHARACTERS.fullmatch(ch)})
        raise InvalidPattern(
            f"Tool pattern {pattern!r} contains {''.join(bad)!r}: use lower-case letters, digits, "
            "'_' and '*' (any run of characters), e.g. 'crm_*' or '*_send'.",
            pattern=pattern,
        )
    if "**" in pattern:
        raise InvalidPattern(
            f"Tool pattern {pattern!r} contains '**'; a single '*' already matches any run of "
            "characters.",
            pattern=pattern,
        )


def validate_patterns(patterns: Iterable[str]) -> None:
    """Validate a whole list. The error names the first bad entry (``exc.index``, its message
    "Entry N: ...") and carries every bad entry's own message in ``exc.messages``."""
    if isinstance(patterns, str):
        raise InvalidPattern("Tool patterns must be a list of strings.", pattern=patterns)
    bad: list[tuple[int, InvalidPattern]] = []
    for index, pattern in enumerate(patterns):
        try:
            validate_pattern(pattern)
        except InvalidPattern as exc:
            bad.append((index, exc))
    if bad:
        index, first = bad[0]
        raise InvalidPattern(
            f"Entry {index + 1}: {first.message}",
            pattern=first.pattern,
            index=index,
            messages=[exc.message for _, exc in bad],
        )


@lru_cache(maxsize=1024)
def _compile(pattern: str) -> re.Pattern[str]:
    normalised = pattern.strip().lower()
    return re.compile(".*".join(re.escape(part) for part in normalised.split("*")), re.DOTALL)


def pattern_matches(pattern: str, name: str) -> bool:
    """Whether tool ``name`` matches ``pattern`` (the whole name, ``*`` = any run)."""
    return _compile(pattern).fullmatch(name) is not None


def _first_match(patterns: Sequence[str], name: str) -> str | None:
    return next((p for p in patterns if pattern_matches(p, name)), None)


@dataclass(frozen=True, slots=True)
class PatternDecision:
    """Why a tool is or is not available; ``reason`` is written for the model and the trace."""

    allowed: bool
    pattern: str | None  # the pattern that decided (denied or allowed), None if none matched
    reason: str


def decide(name: str, allowed: Sequence[str], denied: Sequence[str]) -> PatternDecision:
    """Decide one tool name against an agent's patterns (denied wins)."""
    denied_by = _first_match(denied, name)
    if denied_by is not None:
        return PatternDecision(
            False, denied_by, f"Tool '{name}' is denied for this agent (pattern '{denied_by}')."
        )
    allowed_by = _first_match(allowed, name)
    if allowed_by is None:
        reason = (
            "this agent has no allowed tools"
            if not allowed
            else "it matches none of the agent's allowed tool patterns"
        )
        return PatternDecision(False, None, f"Tool '{name}' is not available: {reason}.")
    return PatternDecision(True, allowed_by, f"Tool '{name}' is allowed (pattern '{allowed_by}').")
