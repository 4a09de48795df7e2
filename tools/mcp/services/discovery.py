"""An MCP server's tools, listed over the network and stored as tools of the registry: new ones
added, changed ones updated, those it no longer lists removed (the refresh, and the beat's refresh
of every enabled server). Precondition: in the agency's context (or the platform's)."""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from core import crypto, tenancy
from tools.mcp import naming
from tools.mcp.addresses import allowed_addresses
from tools.mcp.client import Connection, McpClientError, RemoteTool, list_tools
from tools.mcp.models import McpServer
from tools.models import HandlerType, Tool, ToolCategory
from tools.validation import InvalidToolSchema, check_parameters_schema

logger = logging.getLogger(__name__)

MAX_TOOLS = 200  # per server: a model cannot choose among more anyway, and each is a row
# A tool's input schema as stored, serialized: it goes to the model with every call, and the
# executor validates arguments against it.
MAX_SCHEMA_CHARS = 20_000
_OLDER_DIALECTS = re.compile(r"^https?://json-schema\.org/(draft-0[4-7]|draft/2019-09)/schema#?$")


@dataclass
class RefreshResult:
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # "remote name: why"
    # Set when the server could not be listed (nothing stored changed): McpClientError's code.
    error_code: str = ""
    error_message: str = ""

    @property
    def ok(self) -> bool:
        return not self.error_code


def _schema(remote: RemoteTool) -> dict[str, Any]:
    """The tool's input schema as stored: an older dialect declared at the top (servers built
    on zod often say draft-07) is dropped and the schema checked as Draft 2020-12, which reads
    the schemas tools use alike. A schema past ``MAX_SCHEMA_CHARS`` serialized is refused.

    The executor validates every call's arguments against the schema, and a server's regular
    expression could take exponential time on them (Python's ``re`` backtracks; a short one
    like ``(a+)+$`` is enough, so a length limit would not do). So every ``pattern`` keyword is
    dropped (the server still checks its own arguments), and a schema with
    ``patternProperties`` (whose regular expressions are its keys) is refused."""
    if len(json.dumps(remote.input_schema, default=str)) > MAX_SCHEMA_CHARS:
        raise InvalidToolSchema(f"the input schema is larger than {MAX_SCHEMA_CHARS:,} characters")
    schema = _without_patterns(remote.input_schema)
    declared = str(schema.get("$schema", ""))
    if _OLDER_DIALECTS.match(declared):
        schema.pop("$schema")
    check_parameters_schema(schema)
    return schema


def _without_patterns(node: Any, depth: int = 0) -> Any:
    """A copy of ``node`` without its ``pattern`` keywords (those with a string value: a
    property named "pattern" has a schema, an object). Raises for ``patternProperties``."""
    if depth > 64:
        raise InvalidToolSchema("the input schema is nested too deeply")
    if isinstance(node, dict):
        if isinstance(node.get("patternProperties"), dict):
            raise InvalidToolSchema(
                "the input schema uses 'patternProperties' (regular expressions are refused)"
            )
        return {
            key: _without_patterns(value, depth + 1)
            for key, value in node.items()
            if not (key == "pattern" and isinstance(value, str))
        }
    if isinstance(node, list):
        return [_without_patterns(item, depth + 1) for item in node]
    return node


def _tool_fields(server: McpServer, remote: RemoteTool, schema: dict[str, Any]) -> dict[str, Any]:
    description = remote.description.strip() or f"{remote.name} (MCP server {server.name})."
    return {
        "display_name": (remote.title or remote.name)[:200],
        "description": description[:5000],
        "parameters_schema": schema,
        "handler_config": {"mcp_tool": remote.name},
        "is_active": server.is_enabled,
        "is_dangerous": server.require_approval,
        "rate_limit_per_minute": server.rate_limit_per_minute,
        "rate_limit_per_hour": server.rate_limit_per_hour,
    }


def _store(server: McpServer, remote_tools: list[RemoteTool]) -> RefreshResult:
    result = RefreshResult()
    existing = {str(t.handler_config.get("mcp_tool")): t for t in server.tools.all()}
    kept: set[str] = set()
    names: set[str] = set()
    for remote in sorted(remote_tools, key=lambda t: t.name):
        local = naming.registry_name(server.slug, remote.name)
        if remote.name in kept or local in names:
            result.skipped.append(f"{remote.name}: listed twice")
            continue
        if len(kept) >= MAX_TOOLS:
            result.skipped.append(f"{remote.name}: over the limit of {MAX_TOOLS} tools a server")
            continue
        try:
            schema = _schema(remote)
        except InvalidToolSchema as exc:
            result.skipped.append(f"{remote.name}: {exc.message}")
            continue
        fields = _tool_fields(server, remote, schema)
        tool = existing.get(remote.name)
        try:
            with transaction.atomic():
                if tool is None:
                    Tool.objects.create(
                        agency_id=server.agency_id,
                        mcp_server=server,
                        name=local,
                        category=ToolCategory.CUSTOM,
                        handler_type=HandlerType.EXTERNAL,
                        is_system=False,
                        **fields,
                    )
                    result.added.append(local)
                else:
                    for name, value in fields.items():
                        setattr(tool, name, value)
                    tool.name = local
                    tool.save()
                    result.updated.append(local)
        except IntegrityError:
            result.skipped.append(f"{remote.name}: the name {local} is taken by another tool")
            continue
        kept.add(remote.name)
        names.add(local)
    for remote_name, tool in existing.items():
        if remote_name not in kept:
            result.removed.append(tool.name)
            tool.delete()
    return result


def _failed(server: McpServer, exc: McpClientError) -> RefreshResult:
    server.last_error = f"{exc.code}: {exc.message}"[:2000]
    server.save(update_fields=["last_error", "updated_at"])
    return RefreshResult(
        error_code=exc.code,
        error_message=(
            f"The tools of the MCP server {server.name!r} could not be listed: {exc.message}"
        ),
    )


def mcp_server_refresh(*, server: McpServer) -> RefreshResult:
    """Discover the server's tools and store them: new ones added, changed ones updated, those
    it no longer lists (or lists with an unusable schema) removed. The network exchange runs
    outside any transaction. A server that cannot be listed keeps its stored tools; the
    result's ``error_code`` / ``error_message`` say why, and so does the server's ``last_error``.
    Never raises for the server's faults (callers inside a transaction keep the record), nor for
    stored headers that no configured key decrypts (after a key rotation):
    ``mcp_configuration_error``, until they are entered again."""
    try:
        headers = server.get_headers()
    except crypto.DecryptionError:
        return _failed(
            server,
            McpClientError(
                "mcp_configuration_error",
                "Its stored headers cannot be decrypted (the encryption keys changed): enter "
                "them again.",
            ),
        )
    connection = Connection(
        url=server.url,
        headers=headers,
        timeout_s=float(server.timeout_seconds),
        allowed=allowed_addresses(),
    )
    try:
        remote_tools = list_tools(connection)
    except McpClientError as exc:
        return _failed(server, exc)
    with transaction.atomic():
        locked = McpServer.objects.select_for_update().get(pk=server.pk)
        result = _store(locked, remote_tools)
        locked.last_refreshed_at = timezone.now()
        locked.last_error = "; ".join(result.skipped)[:2000]
        locked.save(update_fields=["last_refreshed_at", "last_error", "updated_at"])
    server.refresh_from_db()
    return result


def mcp_servers_refresh_all() -> dict[str, int]:
    """Every enabled server of every agency, each under its own agency (the beat task).
    Returns how many refreshed and failed."""
    with tenancy.platform_context():
        servers = list(McpServer.objects.filter(is_enabled=True).values_list("pk", "agency_id"))
    counts = {"refreshed": 0, "failed": 0}
    for pk, agency_id in servers:
        try:
            with tenancy.agency_context(agency_id):
                server = McpServer.objects.filter(pk=pk, is_enabled=True).first()
                if server is None:
                    continue
                result = mcp_server_refresh(server=server)
        except Exception:
            # One server's unexpected failure (a bug, the database) must not stop the others.
            logger.exception("MCP server %s: refresh crashed", pk)
            counts["failed"] += 1
            continue
        if result.ok:
            counts["refreshed"] += 1
        else:
            logger.warning("MCP server %s: refresh failed (%s)", pk, result.error_code)
            counts["failed"] += 1
    return counts
