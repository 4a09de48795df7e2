"""Registry names of MCP tools: ``mcp_<server slug>__<tool>``.

A registry name is a function name the LLM APIs accept and the tool patterns can express
(``tools.models.TOOL_NAME_REGEX``: lower-case letters, digits and ``_``, 64 characters at most):
no dots. So ``mcp_*`` matches every MCP tool, ``mcp_weather__*`` every tool of the server with
the prefix ``weather``, ``mcp_weather__get_forecast`` one tool. A server's slug has no double
underscore, so the first ``__`` after ``mcp_`` is always the end of the server's part.

An MCP tool's own name may hold upper case, ``-`` and ``.``: it is lower-cased, every other
character becomes ``_``, and a name that had to change or grew too long gets 8 hex digits of
its hash, so two names of one server never map to the same registry name.
"""

from __future__ import annotations

import hashlib
import re

PREFIX = "mcp_"
SEPARATOR = "__"
MAX_NAME_LENGTH = 64
_NOT_ALLOWED = re.compile(r"[^a-z0-9_]+")
_UNDERSCORES = re.compile(r"_+")


def server_prefix(slug: str) -> str:
    return f"{PREFIX}{slug}{SEPARATOR}"


def _digest(remote_name: str) -> str:
    return hashlib.sha256(remote_name.encode()).hexdigest()[:8]


def registry_name(slug: str, remote_name: str) -> str:
    """The registry name of the server's tool ``remote_name`` (deterministic)."""
    prefix = server_prefix(slug)
    cleaned = _UNDERSCORES.sub("_", _NOT_ALLOWED.sub("_", remote_name.lower())).strip("_")
    room = MAX_NAME_LENGTH - len(prefix)
    if cleaned == remote_name and len(cleaned) <= room:
        return prefix + cleaned
    # Changed (so another name may clean to the same text) or too long: add the hash.
    suffix = _digest(remote_name)
    head = cleaned[: room - len(suffix) - 1].rstrip("_")
    return prefix + (f"{head}_{suffix}" if head else f"tool_{suffix}")
