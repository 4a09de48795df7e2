"""What a hostile or broken MCP server cannot do: send an answer past the call's byte limit
(the call stops with ``response_too_large``, a tool error the model sees)."""

from __future__ import annotations

import uuid

import pytest
from pytest_django.fixtures import Settings

from core import tenancy
from tests.factories import AgencyFactory
from tests.tools.mcp.conftest import register
from tests.tools.mcp.server import TOKEN, McpTestServer
from tools.handlers import ToolContext, ToolError
from tools.mcp.addresses import allowed_addresses
from tools.mcp.client import Connection, McpClientError, call_tool
from tools.mcp.handler import mcp_handler
from tools.mcp.models import McpAllowedAddress
from tools.mcp.naming import registry_name
from tools.mcp.services.discovery import mcp_server_refresh

pytestmark = pytest.mark.django_db


def _connection(server: McpTestServer) -> Connection:
    return Connection(
        url=server.url, headers={"Authorization": TOKEN}, timeout_s=20, allowed=allowed_addresses()
    )


def test_an_answer_past_the_byte_limit_stops_the_call(
    mcp_test_server: McpTestServer,
    allow_mcp_test_server: McpAllowedAddress,
    settings: Settings,
) -> None:
    settings.MCP_MAX_RESPONSE_BYTES = 200_000
    connection = _connection(mcp_test_server)
    assert "x" * 1000 in str(call_tool(connection, "huge", {"size": 1000}))

    with pytest.raises(McpClientError) as caught:
        call_tool(connection, "huge", {"size": 2_000_000})

    assert caught.value.code == "response_too_large"
    assert "200,000 bytes" in caught.value.message


def test_the_model_sees_response_too_large_as_the_tools_error(
    mcp_test_server: McpTestServer,
    allow_mcp_test_server: McpAllowedAddress,
    settings: Settings,
) -> None:
    settings.MCP_MAX_RESPONSE_BYTES = 200_000
    server = register(AgencyFactory.create(), mcp_test_server)
    with tenancy.agency_context(server.agency_id):
        assert mcp_server_refresh(server=server).ok
        name = registry_name(server.slug, "huge")
        context = ToolContext(
            agency_id=server.agency_id,
            site_id=uuid.uuid4(),
            agent_id=uuid.uuid4(),
            execution_id=uuid.uuid4(),
            tool_call_id="call_1",
            idempotency_key="k",
        )
        with pytest.raises(ToolError) as caught:
            mcp_handler(name)(context, {"size": 2_000_000})

    assert caught.value.as_output()["error"]["code"] == "response_too_large"
