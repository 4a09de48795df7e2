"""MCP servers in the admin: staff register one (its tools are discovered on save), the headers
are write-only, moving a server needs them again; the private-address allow-list is for
superusers only."""

from __future__ import annotations

import pytest
from django.test import Client

from core import tenancy
from core.models import Agency, Role
from tests.admin.conftest import member
from tests.admin.helpers import admin_url, change_url
from tests.factories import AgencyFactory
from tests.tools.mcp.server import TOKEN, McpTestServer
from tools.mcp.models import McpAllowedAddress, McpServer
from tools.models import Tool

pytestmark = pytest.mark.django_db


def _form(url: str, **overrides: str) -> dict[str, str]:
    data = {
        "name": "Test tools",
        "slug": "admintest",
        "url": url,
        "is_enabled": "on",
        "timeout_seconds": "60",  # the test server in its own process, on a busy machine
        "headers": "",
        "require_approval": "",
        "rate_limit_per_minute": "",
        "rate_limit_per_hour": "",
    }
    return {**data, **overrides}


def _login(agency: Agency, role: str) -> Client:
    client = Client()
    client.force_login(member(agency, role))
    return client


def _server(agency: Agency) -> McpServer:
    with tenancy.agency_context(agency.id):
        return McpServer.objects.get(agency=agency)


def test_staff_register_a_server_and_its_tools_are_discovered(
    mcp_test_server: McpTestServer, allow_mcp_test_server: McpAllowedAddress
) -> None:
    agency = AgencyFactory.create()
    client = _login(agency, Role.STAFF)

    response = client.post(
        admin_url(McpServer, "add"),
        _form(mcp_test_server.url, headers=f"Authorization: {TOKEN}\n"),
        follow=True,
    )

    assert response.status_code == 200
    notices = [str(message) for message in response.context["messages"]]
    assert any("6 tools added" in notice for notice in notices), notices
    server = _server(agency)
    assert server.get_headers() == {"Authorization": TOKEN}
    with tenancy.agency_context(agency.id):
        assert Tool.objects.filter(mcp_server=server, name="mcp_admintest__add").exists()
    page = client.get(change_url(server)).content.decode()
    assert "set: Authorization (values hidden)" in page
    assert "test-mcp-token" not in page
    assert "mcp_admintest__add" in page


def test_moving_a_server_needs_its_headers_again(
    mcp_test_server: McpTestServer, allow_mcp_test_server: McpAllowedAddress
) -> None:
    agency = AgencyFactory.create()
    client = _login(agency, Role.ADMIN)
    client.post(
        admin_url(McpServer, "add"), _form(mcp_test_server.url, headers=f"Authorization: {TOKEN}")
    )
    server = _server(agency)

    response = client.post(change_url(server), _form("https://evil.example/mcp", slug="admintest"))

    assert response.status_code == 200  # the form again, with the error
    assert "enter the headers for it again" in response.content.decode()
    assert _server(agency).url == mcp_test_server.url


def test_an_unreachable_server_is_saved_with_a_warning() -> None:
    agency = AgencyFactory.create()
    McpAllowedAddress.objects.create(network="127.0.0.1", port=9)  # nothing listens there
    client = _login(agency, Role.STAFF)

    response = client.post(
        admin_url(McpServer, "add"), _form("http://127.0.0.1:9/mcp", slug="down"), follow=True
    )

    assert "could not be listed" in response.content.decode()
    assert _server(agency).last_error.startswith("server_unavailable:")


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://127.0.0.1:9/mcp", "Use an https URL"),  # not allow-listed
        ("https://user:secret@mcp.example.com/mcp", "No user name or password"),
    ],
)
def test_a_refused_url_is_a_form_error_and_the_typed_headers_are_not_echoed(
    url: str, problem: str
) -> None:
    agency = AgencyFactory.create()
    client = _login(agency, Role.STAFF)

    response = client.post(
        admin_url(McpServer, "add"), _form(url, headers="Authorization: Bearer typed-secret-42")
    )

    page = response.content.decode()
    assert response.status_code == 200  # the form again, with the error
    assert problem in page
    assert "typed-secret-42" not in page
    with tenancy.agency_context(agency.id):
        assert not McpServer.objects.filter(agency=agency).exists()


def test_viewers_cannot_register_servers(mcp_test_server: McpTestServer) -> None:
    agency = AgencyFactory.create()
    client = _login(agency, Role.VIEWER)
    assert client.get(admin_url(McpServer, "changelist")).status_code == 200
    assert client.post(admin_url(McpServer, "add"), _form("https://x.example/")).status_code == 403


def test_the_allow_list_is_for_superusers_only() -> None:
    agency = AgencyFactory.create()
    for role in (Role.ADMIN, Role.STAFF):
        client = _login(agency, role)
        assert client.get(admin_url(McpAllowedAddress, "changelist")).status_code == 403
        assert (
            client.post(admin_url(McpAllowedAddress, "add"), {"network": "10.0.0.0/8"}).status_code
            == 403
        )
    assert not McpAllowedAddress.objects.exists()
