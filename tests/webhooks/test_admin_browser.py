"""The webhook admin in a browser: staff add a webhook for an agent and read its URL and secret
in the confirmation, once; the pages fit a phone. Screenshots: .data/screenshots/webhook-*.png."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Browser, expect

from core import tenancy
from core.models import Role
from tests.agents.factories import AgentFactory
from tests.browser.conftest import PHONE, logged_in, screenshot
from tests.factories import MembershipFactory
from tests.processes import AsgiServer
from tests.webhooks.conftest import Hook, deliver
from webhooks.models import Webhook

pytestmark = pytest.mark.slow


def test_staff_add_a_webhook_and_copy_its_secret_from_the_confirmation(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    agent = AgentFactory.create(name="Order desk")
    user = MembershipFactory.create(agency=agent.agency, role=Role.STAFF).user
    page = logged_in(browser, asgi_server, user).new_page()
    page.goto(f"{asgi_server.url}/admin/webhooks/webhook/add/")
    page.select_option("select[name=agent]", str(agent.pk))
    page.fill("input[name=name]", "Shop orders")
    screenshot(page, "webhook-add-desktop")
    page.get_by_role("button", name="Save", exact=True).click()
    message = page.locator("text=/copy it now/")
    expect(message).to_be_visible()
    text = message.inner_text()
    secret = re.search(r"whsec_[A-Za-z0-9_\-]+", text)
    assert secret is not None, text
    with tenancy.platform_context():
        webhook = Webhook.objects.select_related("agent").get(agent=agent)
    assert webhook.path in text
    screenshot(page, "webhook-created-desktop")
    assert deliver(Hook(webhook, secret.group(0))).status_code == 202

    page.set_viewport_size({"width": PHONE["width"], "height": PHONE["height"]})
    page.goto(f"{asgi_server.url}/admin/webhooks/webhook/{webhook.pk}/change/")
    expect(page.locator("body")).to_contain_text(webhook.path)
    assert secret.group(0) not in page.content()
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"] + 1, "the webhook page scrolls sideways on a phone"
    screenshot(page, "webhook-change-phone")
    page.goto(f"{asgi_server.url}/admin/webhooks/webhook/")
    screenshot(page, "webhook-list-phone")
