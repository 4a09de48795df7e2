"""Discovering an MCP server's tools with the SDK, against the real test server on 127.0.0.1:
stored as registry tools with their input schemas, refreshed, headers encrypted and sent, and the
private-address refusal unless a superuser allowed the address."""

from __future__ import annotations

import pytest
from django.db import connection

from core import crypto, tenancy
from core.exceptions import ApplicationError
from tests.factories import AgencyFactory
from tests.tools.factories import ToolFactory
from tests.tools.mcp.conftest import register
from tests.tools.mcp.server import TOKEN, McpTestServer
from tools.mcp.client import RemoteTool
from tools.mcp.models import McpAllowedAddress, McpServer
from tools.mcp.naming import registry_name
from tools.mcp.services.checks import clean_headers
from tools.mcp.services.discovery import (
    RefreshResult,
    _store,
    mcp_server_refresh,
    mcp_servers_refresh_all,
)
from tools.mcp.services.servers import mcp_server_update
from tools.models import Tool
from tools.services import tool_create, tool_update

pytestmark = pytest.mark.django_db

REMOTE_NAMES = {"add", "Get-Weather.v2", "fail", "slow", "secret_action", "huge"}


def _tools(server: McpServer) -> dict[str, Tool]:
    with tenancy.agency_context(server.agency_id):
        return {t.name: t for t in Tool.objects.filter(mcp_server=server)}


def _reload(server: McpServer) -> McpServer:
    with tenancy.agency_context(server.agency_id):
        return McpServer.objects.get(pk=server.pk)


def _refresh(server: McpServer) -> RefreshResult:
    with tenancy.agency_context(server.agency_id):
        return mcp_server_refresh(server=server)


def test_discovery_stores_the_servers_tools_under_its_prefix_with_their_schemas(
    mcp_test_server: McpTestServer, allow_mcp_test_server: McpAllowedAddress
) -> None:
    server = register(AgencyFactory.create(), mcp_test_server)

    result = _refresh(server)

    expected = {registry_name(server.slug, n) for n in REMOTE_NAMES}
    assert result.ok
    assert set(result.added) == expected
    tools = _tools(server)
    assert set(tools) == expected
    add = tools[f"mcp_{server.slug}__add"]
    assert add.agency_id == server.agency_id
    assert not add.is_system
    assert add.is_active
    assert add.description == "Add two integers."
    assert add.parameters_schema["required"] == ["a", "b"]
    assert add.parameters_schema["properties"]["a"]["type"] == "integer"
    weather = tools[registry_name(server.slug, "Get-Weather.v2")]
    assert weather.name.startswith(f"mcp_{server.slug}__get_weather_v2_")
    assert weather.handler_config == {"mcp_tool": "Get-Weather.v2"}
    server = _reload(server)
    assert server.last_refreshed_at is not None
    assert server.last_error == ""


def test_a_refresh_updates_tools_in_place_and_removes_those_no_longer_listed(
    mcp_test_server: McpTestServer, allow_mcp_test_server: McpAllowedAddress
) -> None:
    server = register(AgencyFactory.create(), mcp_test_server)
    _refresh(server)
    before = {name: tool.pk for name, tool in _tools(server).items()}
    gone = ToolFactory.create(
        agency_id=server.agency_id,
        mcp_server=server,
        name=f"mcp_{server.slug}__gone",
        handler_config={"mcp_tool": "gone"},
    )

    result = _refresh(server)

    assert result.removed == [gone.name]
    assert {name: tool.pk for name, tool in _tools(server).items()} == before


def test_headers_are_stored_encrypted_and_sent_to_the_server(
    mcp_test_server: McpTestServer, allow_mcp_test_server: McpAllowedAddress
) -> None:
    server = register(AgencyFactory.create(), mcp_test_server)
    with tenancy.agency_context(server.agency_id), connection.cursor() as cursor:
        cursor.execute(
            "SELECT headers_encrypted, header_names::text FROM tools_mcpserver WHERE id = %s",
            [server.pk],
        )
        stored, names = cursor.fetchone()
    assert TOKEN not in stored
    assert "test-mcp-token" not in stored
    assert names == "{Authorization}"
    assert server.get_headers() == {"Authorization": TOKEN}
    assert TOKEN not in repr(server)
    assert TOKEN not in str(server)

    assert _refresh(server).added  # the server answers only with the token


def test_a_server_that_refuses_the_credentials_keeps_its_tools_and_records_why(
    mcp_test_server: McpTestServer, allow_mcp_test_server: McpAllowedAddress
) -> None:
    server = register(AgencyFactory.create(), mcp_test_server)
    _refresh(server)
    with tenancy.agency_context(server.agency_id):
        mcp_server_update(server=server, headers={"Authorization": "Bearer wrong"})

    result = _refresh(server)

    assert not result.ok
    assert result.error_code == "mcp_error"
    assert len(_tools(server)) == len(REMOTE_NAMES)  # the stored tools stay
    assert _reload(server).last_error.startswith("mcp_error:")


def test_a_private_address_not_allow_listed_is_refused_before_connecting(
    mcp_test_server: McpTestServer,
) -> None:
    allowed = McpAllowedAddress.objects.create(network="127.0.0.1", port=mcp_test_server.port)
    server = register(AgencyFactory.create(), mcp_test_server)
    allowed.delete()  # a superuser took it back
    # Allowed, but on another port: still refused.
    McpAllowedAddress.objects.create(network="127.0.0.0/8", port=mcp_test_server.port + 1)

    result = _refresh(server)

    assert result.error_code == "blocked_address"
    assert "loopback" in result.error_message
    assert _tools(server) == {}
    assert _reload(server).last_error.startswith("blocked_address:")


def test_a_metadata_address_is_refused_even_when_allow_listed() -> None:
    agency = AgencyFactory.create()
    McpAllowedAddress.objects.create(network="169.254.0.0/16")
    with tenancy.agency_context(agency.id):
        server = McpServer.objects.create(
            agency=agency, name="Metadata", slug="meta", url="http://169.254.169.254/mcp"
        )
        result = mcp_server_refresh(server=server)
    assert result.error_code == "blocked_address"
    assert "metadata" in result.error_message


def test_tools_with_an_unusable_schema_are_skipped_and_older_dialects_accepted() -> None:
    agency = AgencyFactory.create()
    with tenancy.agency_context(agency.id):
        server = McpServer.objects.create(
            agency=agency, name="S", slug="schemas", url="https://mcp.example.com/mcp"
        )
        result = _store(
            server,
            [
                RemoteTool("ok", "", "", {"type": "object", "properties": {}}),
                RemoteTool(
                    "zod",
                    "",
                    "",
                    {
                        "$schema": "http://json-schema.org/draft-07/schema#",
                        "type": "object",
                        "properties": {"q": {"type": "string"}},
                    },
                ),
                RemoteTool("not_an_object", "", "", {"type": "string"}),
                RemoteTool("bad_type", "", "", {"type": "object", "properties": {"x": 5}}),
            ],
        )
    assert sorted(result.added) == ["mcp_schemas__ok", "mcp_schemas__zod"]
    assert [s.split(":")[0] for s in result.skipped] == ["bad_type", "not_an_object"]
    assert "$schema" not in _tools(server)["mcp_schemas__zod"].parameters_schema


def test_a_name_taken_by_another_tool_is_skipped() -> None:
    agency = AgencyFactory.create()
    ToolFactory.create(agency=agency, name="mcp_taken__add")
    with tenancy.agency_context(agency.id):
        server = McpServer.objects.create(
            agency=agency, name="S", slug="taken", url="https://mcp.example.com/mcp"
        )
        result = _store(server, [RemoteTool("add", "", "", {"type": "object"})])
    assert result.added == []
    assert result.skipped == ["add: the name mcp_taken__add is taken by another tool"]


@pytest.mark.parametrize(
    ("headers", "problem"),
    [
        ({"Host": "evil.example"}, "set by the MCP client itself"),
        ({"X-Token": "a\r\nInjected: yes"}, "one line"),
        ({"Bad Name": "x"}, "not a header name"),
        ({f"X-{i}": "v" for i in range(21)}, "At most 20"),
    ],
)
def test_bad_headers_are_refused(headers: dict[str, str], problem: str) -> None:
    with pytest.raises(ApplicationError) as caught:
        clean_headers(headers)
    assert problem in " ".join(caught.value.extra["fields"]["headers"])


def test_the_scheduled_refresh_visits_every_enabled_server_under_its_agency(
    mcp_test_server: McpTestServer, allow_mcp_test_server: McpAllowedAddress
) -> None:
    reachable = register(AgencyFactory.create(), mcp_test_server)
    down = register(AgencyFactory.create(), mcp_test_server, headers={})  # refused: no token
    off = register(AgencyFactory.create(), mcp_test_server, is_enabled=False)

    counts = mcp_servers_refresh_all()

    assert counts["refreshed"] >= 1
    assert counts["failed"] >= 1
    assert len(_tools(reachable)) == len(REMOTE_NAMES)
    assert _reload(down).last_error.startswith("mcp_error:")
    assert _reload(off).last_refreshed_at is None
    assert _tools(off) == {}


def test_a_server_listing_too_many_tools_keeps_the_first_ones() -> None:
    agency = AgencyFactory.create()
    with tenancy.agency_context(agency.id):
        server = McpServer.objects.create(
            agency=agency, name="Big", slug="big", url="https://mcp.example.com/mcp"
        )
        remote = [RemoteTool(f"t{i:03d}", "", "", {"type": "object"}) for i in range(205)]
        result = _store(server, remote)
    assert len(result.added) == 200
    assert len(result.skipped) == 5
    assert result.skipped[0] == "t200: over the limit of 200 tools a server"


def test_a_schema_too_large_is_skipped_and_pattern_keywords_are_dropped() -> None:
    """A server's regular expressions are never run on the model's arguments (regex DoS)."""
    agency = AgencyFactory.create()
    big = {f"p{i}": {"type": "string", "description": "x" * 500} for i in range(50)}
    with tenancy.agency_context(agency.id):
        server = McpServer.objects.create(
            agency=agency, name="S", slug="limits", url="https://mcp.example.com/mcp"
        )
        result = _store(
            server,
            [
                RemoteTool("big", "", "", {"type": "object", "properties": big}),
                RemoteTool(
                    "grep",
                    "",
                    "",
                    {
                        "type": "object",
                        "properties": {
                            "pattern": {"type": "string", "pattern": "^(a+)+$"},
                            "tags": {"type": "array", "items": {"pattern": "(x|x)*y"}},
                        },
                    },
                ),
                RemoteTool(
                    "keyed",
                    "",
                    "",
                    {"type": "object", "patternProperties": {"^(a+)+$": {"type": "string"}}},
                ),
            ],
        )
    assert result.added == ["mcp_limits__grep"]
    assert [s.split(":")[0] for s in result.skipped] == ["big", "keyed"]
    assert "20,000 characters" in result.skipped[0]
    assert "patternProperties" in result.skipped[1]
    stored = _tools(server)["mcp_limits__grep"].parameters_schema
    assert stored["properties"]["pattern"] == {"type": "string"}  # the argument stays
    assert stored["properties"]["tags"]["items"] == {}


def test_headers_that_cannot_be_decrypted_fail_the_refresh_with_a_configuration_error(
    mcp_test_server: McpTestServer, allow_mcp_test_server: McpAllowedAddress
) -> None:
    server = register(AgencyFactory.create(), mcp_test_server)
    with tenancy.agency_context(server.agency_id):
        McpServer.objects.filter(pk=server.pk).update(headers_encrypted="gAAAAA-not-a-token")
    server = _reload(server)
    with pytest.raises(crypto.DecryptionError):
        server.get_headers()

    result = _refresh(server)

    assert result.error_code == "mcp_configuration_error"
    assert "enter them again" in result.error_message
    assert _reload(server).last_error.startswith("mcp_configuration_error:")


def test_the_scheduled_refresh_goes_on_past_a_server_that_fails_unexpectedly(
    mcp_test_server: McpTestServer,
    allow_mcp_test_server: McpAllowedAddress,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    undecryptable = register(AgencyFactory.create(), mcp_test_server)
    with tenancy.platform_context():
        McpServer.objects.filter(pk=undecryptable.pk).update(headers_encrypted="gAAAAA-bad")
    crashing = register(AgencyFactory.create(), mcp_test_server)
    reachable = register(AgencyFactory.create(), mcp_test_server)
    real_store = _store

    def store(server: McpServer, remote_tools: list[RemoteTool]) -> RefreshResult:
        if server.pk == crashing.pk:
            raise RuntimeError("a bug")
        return real_store(server, remote_tools)

    monkeypatch.setattr("tools.mcp.services.discovery._store", store)

    counts = mcp_servers_refresh_all()

    assert counts["failed"] >= 2
    assert len(_tools(reachable)) == len(REMOTE_NAMES)
    assert _reload(undecryptable).last_error.startswith("mcp_configuration_error:")
    assert "refresh crashed" in caplog.text


def test_other_tools_cannot_take_the_mcp_prefix() -> None:
    agency = AgencyFactory.create()
    with tenancy.agency_context(agency.id):
        with pytest.raises(ApplicationError) as caught:
            tool_create(
                agency_id=agency.id,
                name="mcp_weather__forecast",
                display_name="Forecast",
                description="Not an MCP tool.",
                parameters_schema={"type": "object"},
            )
        assert "reserved for MCP servers' tools" in caught.value.extra["fields"]["name"][0]
        tool = ToolFactory.create(agency=agency, name="my_forecast")
        with pytest.raises(ApplicationError):
            tool_update(tool=tool, name="mcp_weather__forecast")
        assert tool_update(tool=tool, name="my_forecast_v2").name == "my_forecast_v2"
