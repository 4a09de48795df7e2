"""The scheduled refresh of every agency's MCP tools (Celery beat: ``refresh-mcp-tools``)."""

from __future__ import annotations

from celery import shared_task

from tools.mcp.services.discovery import mcp_servers_refresh_all


@shared_task(name="tools.refresh_mcp_servers", ignore_result=True)
def refresh_mcp_servers_task() -> dict[str, int]:
    """Discover the tools of every enabled MCP server again; a server that cannot be reached
    keeps its stored tools and says why in its ``last_error``."""
    return mcp_servers_refresh_all()
