"""Every page of the admin's sidebar, with a row in each list, as platform staff sees it: no
column header, filter title or breadcrumb shows a raw field name ("Llm calls", "Cost usd",
"Is active", "Duration ms", "source_entity_id"), and each page's breadcrumbs end with the name the
sidebar gives it (issue 27 item 13). Each page is looked at 1440 and 390 px wide."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from django.urls import reverse
from playwright.sync_api import Browser, Page

from core import tenancy
from core.admin_navigation import GROUPS
from tests.admin.rows import ROWS
from tests.browser.conftest import logged_in, look_at_both_widths
from tests.factories import AgencyFactory, UserFactory
from tests.processes import AsgiServer

pytestmark = pytest.mark.slow

# A label as Django makes it from a field's name: an underscore, an acronym in lower case
# ("Llm calls", "Cost usd", "Page url"), a unit without its brackets ("Duration ms"), "Is …".
RAW = re.compile(
    r"_|\b(?:Llm|llm|Usd|usd|Url|url|Api|api|Mcp|mcp|Ip|ip|Id|id)\b|(?<!\()\bms\b|^Is [a-z]"
)


def raw_labels(labels: list[str]) -> list[str]:
    return [label for label in labels if RAW.search(label.strip())]


def test_the_raw_label_rule_catches_what_the_issue_names() -> None:
    named = ["Llm calls", "Cost usd", "Is active", "Duration ms", "source_entity_id", "Page url"]
    proper = ["LLM calls", "Cost (USD)", "Active", "Duration (ms)", "Source entity ID", "Idle"]
    assert raw_labels(named) == named
    assert raw_labels(proper) == []


def _sidebar(page: Page) -> list[tuple[str, str]]:
    """(name, path) of each list the page's sidebar links to, named as core.admin_navigation
    names it."""
    found = []
    for _group, items in GROUPS:
        for name, _icon, label in items:
            app_label, model = label.lower().split(".")
            href = reverse(f"admin:{app_label}_{model}_changelist")
            if page.locator(f"a[href='{href}']").count():
                found.append((name, href))
    return found


def _texts(page: Page, selector: str) -> list[str]:
    """The text of each element, without its icons (Material Symbols ligatures: "arrow_up")."""
    texts: list[str] = page.evaluate(
        """selector => [...document.querySelectorAll(selector)].map(element => {
            const copy = element.cloneNode(true);
            copy.querySelectorAll(".material-symbols-outlined").forEach(icon => icon.remove());
            return copy.textContent.replace(/\\s+/g, " ").trim();
        })""",
        selector,
    )
    return [text for text in texts if text]


def test_no_sidebar_page_shows_a_raw_label(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    agency = AgencyFactory.create(slug=f"labels-{uuid.uuid4().hex[:8]}")
    with tenancy.agency_context(agency.id):
        for make in ROWS.values():
            make(agency)
    staff = UserFactory.create(is_superuser=True)
    page = logged_in(browser, asgi_server, staff).new_page()
    page.goto(f"{asgi_server.url}/admin/")
    pages = _sidebar(page)
    assert len(pages) > 40, pages  # every group's lists (collapsed groups' links are there too)

    found: dict[str, list[str]] = {}
    for name, href in pages:
        page.goto(f"{asgi_server.url}{href}")
        crumbs = _texts(page, "#header-inner h1 .tracking-tight")  # (templates/unfold/helpers)
        columns = _texts(page, "#result_list thead th")
        filters = _texts(page, "#changelist-filter h3, [data-filter-title], .filter-title")
        raw = raw_labels([*crumbs, *columns, *filters])
        if crumbs and crumbs[-1] != name:
            raw.append(f"breadcrumb {crumbs[-1]!r}, sidebar {name!r}")
        if raw:
            found[href] = raw
    assert found == {}, "\n".join(f"{href}: {labels}" for href, labels in found.items())

    for href in ("/admin/agents/agent/", "/admin/tools/tool/", "/admin/core/event/"):
        page.goto(f"{asgi_server.url}{href}")
        look_at_both_widths(page, "u3-labels-" + href.strip("/").replace("/", "-"))
