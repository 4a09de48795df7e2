"""The MCP server pages in headless Chromium, at desktop and phone widths: the header values are
never on the page, its tools are listed, and nothing overflows the phone's width."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from core import tenancy
from core.models import Role
from tests.browser.conftest import PHONE, browser, logged_in, screenshot
from tests.factories import AgencyFactory, MembershipFactory
from tests.processes import AsgiServer
from tests.tools.factories import ToolFactory
from tests.tools.mcp.server import TOKEN
from tools.mcp.models import McpServer

__all__ = ["browser"]  # the fixture, imported for this module

pytestmark = pytest.mark.slow


def _fits(page: Page) -> None:
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"] + 1


def test_the_mcp_server_pages_show_header_names_and_tools_never_values(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    agency = AgencyFactory.create(name="Harbor Lights")
    staff = MembershipFactory.create(agency=agency, role=Role.STAFF).user
    slug = f"weather{uuid.uuid4().hex[:6]}"
    with tenancy.agency_context(agency.id):
        server = McpServer(
            agency=agency, name="Weather service", slug=slug, url="https://mcp.example.com/mcp"
        )
        server.set_headers({"Authorization": TOKEN, "X-Team": "ops"})
        server.save()
    for tool in ("get_forecast", "get_alerts"):
        ToolFactory.create(
            agency=agency,
            mcp_server=server,
            name=f"mcp_{slug}__{tool}",
            handler_config={"mcp_tool": tool},
        )

    context = logged_in(browser, asgi_server, staff)
    page = context.new_page()
    page.goto(f"{asgi_server.url}/admin/tools/mcpserver/")
    expect(page.get_by_text("Weather service")).to_be_visible()
    screenshot(page, "mcp-servers")
    page.goto(f"{asgi_server.url}/admin/tools/mcpserver/{server.pk}/change/")
    expect(page.get_by_text("set: Authorization, X-Team (values hidden)")).to_be_visible()
    expect(page.get_by_text(f"mcp_{slug}__get_forecast")).to_be_visible()
    assert "test-mcp-token" not in page.content()
    screenshot(page, "mcp-server")

    page.set_viewport_size(PHONE)
    page.reload()
    expect(page.get_by_text(f"mcp_{slug}__get_alerts")).to_be_visible()
    screenshot(page, "mcp-server-phone")
    _fits(page)
    context.close()
