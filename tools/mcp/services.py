"""Writers for MCP servers and the tools discovered on them. Precondition for all: in the agency's
context (or the platform's)."""

from __future__ import annotations

import json
import logging
import re
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from django.db import IntegrityError, transaction
from django.utils import timezone

from core import crypto, tenancy
from core.exceptions import ApplicationError
from tools.mcp import naming
from tools.mcp.addresses import AddressRefused, allowed_addresses, check
from tools.mcp.client import Connection, McpClientError, RemoteTool, list_tools
from tools.mcp.models import MAX_TIMEOUT_SECONDS, SLUG_MAX_LENGTH, SLUG_REGEX, McpServer
from tools.models import HandlerType, Tool, ToolCategory
from tools.net.addresses import system_resolver
from tools.validation import InvalidToolSchema, check_parameters_schema

logger = logging.getLogger(__name__)

MAX_HEADERS = 20
MAX_TOOLS = 200  # per server: a model cannot choose among more anyway, and each is a row
MAX_HEADER_VALUE = 4000
# A tool's input schema as stored, serialized: it goes to the model with every call, and the
# executor validates arguments against it.
MAX_SCHEMA_CHARS = 20_000
# Set by the MCP transport itself, or about the connection: never from a stored header.
RESERVED_HEADERS = frozenset(
    {
        "host", "content-length", "content-type", "accept", "connection", "transfer-encoding",
        "mcp-session-id", "mcp-protocol-version", "last-event-id", "upgrade", "te", "trailer",
        "keep-alive", "proxy-authorization", "proxy-connection",
    }
)  # fmt: skip
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # an HTTP field name (RFC 9110 token)
# clean_headers' rules on names and values, for the API schema (reserved names and a name given
# twice in another case remain the service's to refuse).
HEADERS_SCHEMA = {
    "type": "object",
    "maxProperties": MAX_HEADERS,
    "propertyNames": {"pattern": _TOKEN.pattern, "maxLength": 100},
    "additionalProperties": {
        "type": "string",
        "maxLength": MAX_HEADER_VALUE,
        "pattern": r"^(?:[^\s\x00](?:[^\r\n\x00]*[^\s\x00])?)?$",
    },
}
EDITABLE_FIELDS = frozenset(
    {
        "name", "slug", "url", "is_enabled", "timeout_seconds", "require_approval",
        "rate_limit_per_minute", "rate_limit_per_hour",
    }
)  # fmt: skip
# The server settings each of its tools carries (copied at every change and refresh).
_TOOL_SETTINGS = frozenset(
    {"is_enabled", "require_approval", "rate_limit_per_minute", "rate_limit_per_hour"}
)
_OLDER_DIALECTS = re.compile(r"^https?://json-schema\.org/(draft-0[4-7]|draft/2019-09)/schema#?$")


def _invalid(
    fields: dict[str, list[str]], message: str = "The MCP server is invalid.", *, status: int = 400
) -> Any:
    return ApplicationError("invalid", message, fields=fields, status=status)


def clean_headers(headers: object) -> dict[str, str]:
    """The headers to store, or a 400 naming what is wrong (names are RFC 9110 tokens, values
    one line of text, nothing the transport sets itself)."""
    if not isinstance(headers, dict):
        raise _invalid({"headers": ["An object of header names to values."]})
    if len(headers) > MAX_HEADERS:
        raise _invalid({"headers": [f"At most {MAX_HEADERS} headers."]})
    errors: list[str] = []
    cleaned: dict[str, str] = {}
    for name, value in headers.items():
        if not isinstance(name, str) or not _TOKEN.fullmatch(name) or len(name) > 100:
            errors.append(f"{str(name)[:100]!r} is not a header name.")
            continue
        if name.lower() in RESERVED_HEADERS:
            errors.append(f"{name!r} is set by the MCP client itself.")
            continue
        if name.lower() in {n.lower() for n in cleaned}:
            errors.append(f"{name!r} is given twice.")
            continue
        if not isinstance(value, str) or len(value) > MAX_HEADER_VALUE:
            errors.append(f"The value of {name!r} must be text of at most {MAX_HEADER_VALUE}.")
            continue
        if any(ch in value for ch in "\r\n\0") or value != value.strip():
            errors.append(f"The value of {name!r} must be one line without surrounding spaces.")
            continue
        cleaned[name] = value
    if errors:
        # Names are what OpenAPI 3.0 cannot constrain (HEADERS_SCHEMA's propertyNames is 3.1).
        raise _invalid({"headers": errors}, status=422)
    return cleaned


def url_problems(url: str) -> list[str]:
    """Why the server may not be at ``url`` (empty: it may). No user name or password in it
    (the ``web_scrape`` rule: credentials go in the headers, stored encrypted), and https
    unless every address of its host is on the allow-list (plain http would send the headers
    unencrypted). The host of a plain http URL is resolved now; the client checks again at
    every connection."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return ["An http(s) URL of the server's streamable HTTP endpoint."]
    if "@" in parts.netloc:
        return ["No user name or password in the URL: put credentials in the headers."]
    if parts.scheme == "http":
        try:
            port = parts.port or 80
            check(parts.hostname, port, allowed_addresses(), system_resolver, plain_http=True)
        except ValueError:
            return ["The URL's port is not a number from 0 to 65535."]
        except AddressRefused:
            return [
                "Use an https URL: plain http is only for addresses a superuser allowed "
                "(admin: MCP allowed private addresses), since it would send the headers "
                "unencrypted."
            ]
    return []


def _validate(fields: dict[str, Any]) -> None:
    unknown = set(fields) - EDITABLE_FIELDS
    if unknown:
        raise ApplicationError("invalid", f"Unknown MCP server fields: {sorted(unknown)}.")
    errors: dict[str, list[str]] = {}
    slug = fields.get("slug")
    if slug is not None and (not re.fullmatch(SLUG_REGEX, slug) or len(slug) > SLUG_MAX_LENGTH):
        errors["slug"] = [
            "Lower-case letters and digits, single underscores between them, starting with a "
            "letter, at most 24 characters (e.g. 'weather')."
        ]
    # What a URL the schema's ``format: uri`` takes may still break (scheme, credentials, plain
    # http): rules the schema cannot state, 422, unless a field is wrong as the schema says.
    rules: dict[str, list[str]] = {}
    url = fields.get("url")
    if url is not None:
        problems = (
            url_problems(url)
            if isinstance(url, str) and re.match(r"^https?://[^/\s]+", url)
            else ["An http(s) URL of the server's streamable HTTP endpoint."]
        )
        if problems:
            rules["url"] = problems
    timeout = fields.get("timeout_seconds")
    if timeout is not None and not 1 <= timeout <= MAX_TIMEOUT_SECONDS:
        errors["timeout_seconds"] = [f"From 1 to {MAX_TIMEOUT_SECONDS} seconds."]
    if errors:
        raise _invalid({**errors, **rules})
    if rules:
        raise _invalid(rules, status=422)


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
