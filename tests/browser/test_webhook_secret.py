"""A webhook's secret, shown once in the admin's message (issue 27 item 6): one tap copies it, it
fits a phone's screen, and it has no letters a person mistakes for others (l, I, 0, O); a
secret made before keeps working. Screenshots: .data/screenshots/webhook-secret-*.png."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from core import tenancy
from core.models import Role
from tests.agents.factories import AgentFactory
from tests.browser.conftest import DESKTOP, PHONE, logged_in, screenshot
from tests.factories import MembershipFactory
from tests.processes import AsgiServer
from tests.webhooks.conftest import Hook, deliver, make_hook
from webhooks.models import Webhook

pytestmark = pytest.mark.slow
NEW_SECRET = re.compile(r"whsec_[1-9A-HJ-NP-Za-km-z]{44}")
# A secret as they were made before (secrets.token_urlsafe): l, I, 0, O, '-' and '_'.
OLD_SECRET = "whsec_l1I0O-_ab" + "x" * 30


def _copy_shown_secret(page: Page) -> str:
    """The secret in the message, after checking that its button copies exactly it."""
    shown = page.locator("[data-webhook-secret]")
    expect(shown).to_be_visible()
    secret = shown.inner_text()
    assert NEW_SECRET.fullmatch(secret), secret
    page.locator("[data-copy-secret]").click()
    expect(page.locator("[data-copy-secret]")).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == secret
    return secret


def _fits(page: Page) -> None:
    viewport = page.viewport_size
    assert viewport is not None
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= viewport["width"], f"{page.url} scrolls sideways ({width} px)"


def test_the_secret_shown_once_copies_in_one_tap_and_fits_a_phone(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    agent = AgentFactory.create(name="Order desk")
    user = MembershipFactory.create(agency=agent.agency, role=Role.STAFF).user
    old = make_hook(agent)
    with tenancy.agency_context(agent.agency_id):
        old.webhook.set_secret(OLD_SECRET)
        old.webhook.save(update_fields=["secret_encrypted"])
    old = Hook(old.webhook, OLD_SECRET)
    assert deliver(old).status_code == 202  # made before: still valid

    context = logged_in(
        browser, asgi_server, user, permissions=["clipboard-read", "clipboard-write"]
    )
    page = context.new_page()
    page.goto(f"{asgi_server.url}/admin/webhooks/webhook/add/")
    screenshot(page, "webhook-secret-add-desktop")
    page.select_option("select[name=agent]", str(agent.pk))
    page.fill("input[name=name]", "Shop orders")
    page.get_by_role("button", name="Save", exact=True).click()
    secret = _copy_shown_secret(page)
    _fits(page)
    screenshot(page, "webhook-secret-created-desktop")
    with tenancy.platform_context():
        created = Webhook.objects.select_related("agent").get(agent=agent, name="Shop orders")
    assert deliver(Hook(created, secret)).status_code == 202

    page.set_viewport_size(PHONE)
    page.goto(f"{asgi_server.url}/admin/webhooks/webhook/add/")
    _fits(page)
    screenshot(page, "webhook-secret-add-phone")
    # Rotate the old one (a day's grace): the new secret in the message, on a phone.
    page.goto(f"{asgi_server.url}/admin/webhooks/webhook/")
    page.locator(f"input[name=_selected_action][value='{old.webhook.pk}']").check()
    page.select_option("select[name=action]", "rotate_with_grace")
    page.locator("button[name=index]").click()
    rotated = _copy_shown_secret(page)
    _fits(page)
    screenshot(page, "webhook-secret-rotated-phone")
    assert deliver(Hook(old.webhook, rotated)).status_code == 202
    assert deliver(old).status_code == 202  # the old secret, in its grace period

    page.set_viewport_size(DESKTOP)
    page.reload()
    expect(page.locator("[data-webhook-secret]")).to_have_count(0)  # shown once
    screenshot(page, "webhook-secret-list-desktop")
