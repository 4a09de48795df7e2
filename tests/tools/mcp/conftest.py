"""MCP test fixtures: the small MCP server of tests/tools/mcp/server.py on 127.0.0.1 (one per
test session), allow-listed the way a superuser would (an ``McpAllowedAddress`` row), and a
helper that registers it for an agency with its credential header."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from core import tenancy
from core.models import Agency
from tests.tools.mcp.server import TOKEN, McpTestServer
from tools.mcp.models import McpAllowedAddress, McpServer
from tools.mcp.services.servers import mcp_server_create


@pytest.fixture(scope="session")
def mcp_test_server() -> Iterator[McpTestServer]:
    server = McpTestServer().start()
    yield server
    server.stop()


@pytest.fixture
def allow_mcp_test_server(db: None, mcp_test_server: McpTestServer) -> McpAllowedAddress:
    """What a superuser does in the admin: 127.0.0.1, on the test server's port only."""
    return McpAllowedAddress.objects.create(
        network="127.0.0.1", port=mcp_test_server.port, note="the tests' MCP server"
    )


def register(
    agency: Agency,
    server: McpTestServer,
    *,
    headers: dict[str, str] | None = None,
    **fields: object,
) -> McpServer:
    """The test server registered for ``agency`` under a fresh prefix (with its token)."""
    with tenancy.agency_context(agency.id):
        return mcp_server_create(
            agency_id=agency.id,
            name="Test tools",
            slug=f"t{uuid.uuid4().hex[:8]}",
            url=server.url,
            headers={"Authorization": TOKEN} if headers is None else headers,
            **fields,
        )
