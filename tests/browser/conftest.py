"""Browser tests: Debian's Chromium (/usr/bin/chromium, installed by `make test`) driven by
Playwright for Python against the real ASGI server and a real Celery worker."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from playwright.sync_api import Browser, BrowserContext, Page, ViewportSize, sync_playwright

from core.models import User
from tests.processes import AsgiServer

CHROMIUM = os.environ.get("AGENTDESK_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--no-first-run", "--disable-sync",
]  # fmt: skip
# Screenshots the tests make (the README's come from here: docs/img/).
SHOTS = Path(__file__).resolve().parents[2] / ".data" / "screenshots"
DESKTOP: ViewportSize = {"width": 1440, "height": 1000}
PHONE: ViewportSize = {"width": 390, "height": 844}


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Per module: Playwright's sync API keeps an event loop running in this thread while it is
    open, and Django refuses database calls under a running loop unless told it is safe (it is:
    the test's own calls are synchronous), so that is allowed only while a browser is open."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs Debian's chromium package")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            yield browser
            browser.close()
    finally:
        del os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"]


def logged_in(browser: Browser, server: AsgiServer, user: User, **options: Any) -> BrowserContext:
    """A browser context with ``user``'s admin session (the login form is tested elsewhere)."""
    client = Client()
    client.force_login(user)
    context = browser.new_context(viewport=DESKTOP, **options)
    context.add_cookies(
        [{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": server.url}]
    )
    return context


def screenshot(page: Page, name: str, *, full_page: bool = True) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path
