"""Writers of MCP servers: created, changed (their tools carry the server's settings along),
deleted. Precondition for all: in the agency's context (or the platform's)."""

from __future__ import annotations

import uuid
from typing import Any

from django.db import IntegrityError, transaction

from tools.mcp.models import McpServer
from tools.mcp.services.checks import _invalid, _validate, clean_headers

# The server settings each of its tools carries (copied at every change and refresh).
_TOOL_SETTINGS = frozenset(
    {"is_enabled", "require_approval", "rate_limit_per_minute", "rate_limit_per_hour"}
)


def _save(server: McpServer) -> McpServer:
    try:
        with transaction.atomic():
            server.save()
    except IntegrityError as exc:
        if "slug" in str(exc):
            raise _invalid({"slug": [f"The prefix {server.slug!r} is taken."]}, status=409) from exc
        raise
    return server


def _sync_tool_settings(server: McpServer) -> None:
    server.tools.update(
        is_active=server.is_enabled,
        is_dangerous=server.require_approval,
        rate_limit_per_minute=server.rate_limit_per_minute,
        rate_limit_per_hour=server.rate_limit_per_hour,
    )


@transaction.atomic
def mcp_server_create(
    *, agency_id: uuid.UUID, headers: dict[str, str] | None = None, **fields: Any
) -> McpServer:
    """A new server, no tools yet (:func:`mcp_server_refresh` discovers them)."""
    _validate(fields)
    server = McpServer(agency_id=agency_id, **fields)
    server.set_headers(clean_headers(headers or {}))
    return _save(server)


@transaction.atomic
def mcp_server_update(
    *, server: McpServer, headers: dict[str, str] | None = None, **fields: Any
) -> McpServer:
    """``headers``: None keeps the stored ones, ``{}`` removes them. Pointing the server at
    another URL (or prefix) needs the headers again: stored credentials go only where they
    were entered for."""
    _validate(fields)
    moved = "url" in fields and fields["url"] != server.url
    if moved and headers is None and server.has_headers:
        raise _invalid(
            {"headers": ["The URL changed: enter the headers for it again, or remove them ({})."]}
        )
    if "slug" in fields and fields["slug"] != server.slug and server.tools.exists():
        raise _invalid(
            {"slug": ["The prefix of a server with tools cannot change (agents' patterns name "
                      "them); delete the server and register it again."]}
        )  # fmt: skip
    for name, value in fields.items():
        setattr(server, name, value)
    if headers is not None:
        server.set_headers(clean_headers(headers))
    _save(server)
    if _TOOL_SETTINGS & set(fields):
        _sync_tool_settings(server)
    return server


@transaction.atomic
def mcp_server_delete(*, server: McpServer) -> None:
    """The server and its tools (their calls stay, with their names)."""
    server.delete()
