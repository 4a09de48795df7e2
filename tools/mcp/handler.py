"""The handler of every MCP tool (``mcp_<server>__<tool>``), through the executor like any tool.

By the time it runs, the executor has done what it does for every tool: the run was offered the
tool (patterns, permissions, modules), the arguments passed the stored input schema, the rate
limit was counted, risk rules and approvals were applied, and the ``ToolCall`` row is written with
the outcome. Here: find the tool's server (under the run's agency), call the tool over MCP within
the server's time limit, and turn every failure into a :class:`ToolError` the model sees.
"""

from __future__ import annotations

from typing import Any

from core import crypto
from tools.handlers import Handler, ToolContext, ToolError
from tools.mcp import naming
from tools.mcp.addresses import allowed_addresses
from tools.mcp.client import Connection, McpClientError, call_tool
from tools.models import Tool
from tools.registry import handler_family


def _call(name: str, ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    tool = (
        Tool.objects.select_related("mcp_server")
        .filter(agency_id=ctx.agency_id, name=name, mcp_server__isnull=False)
        .first()
    )
    if tool is None or tool.mcp_server is None:
        raise ToolError("not_implemented", f"Tool {name!r} is not a tool of an MCP server.")
    server = tool.mcp_server
    if not server.is_enabled:
        raise ToolError("mcp_server_disabled", f"The MCP server {server.name!r} is switched off.")
    remote_name = str(tool.handler_config.get("mcp_tool") or "")
    try:
        headers = server.get_headers()
    except crypto.DecryptionError:
        raise ToolError(
            "mcp_configuration_error",
            f"The stored headers of the MCP server {server.name!r} cannot be decrypted.",
        ) from None
    connection = Connection(
        url=server.url,
        headers=headers,
        timeout_s=float(server.timeout_seconds),
        allowed=allowed_addresses(),
    )
    try:
        return call_tool(connection, remote_name, args)
    except McpClientError as exc:
        raise ToolError(exc.code, exc.message, server=server.slug, tool=remote_name) from None


@handler_family(naming.PREFIX)
def mcp_handler(name: str) -> Handler:
    def run(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
        return _call(name, ctx, args)

    return run
