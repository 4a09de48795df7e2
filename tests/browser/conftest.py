"""Browser tests: Debian's Chromium (/usr/bin/chromium, installed by `make test`) driven by
Playwright for Python against the real ASGI server and a real Celery worker."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from playwright.sync_api import (
    Browser,
    BrowserContext,
    Locator,
    Page,
    ViewportSize,
    expect,
    sync_playwright,
)

from agents.models import Agent, Execution
from agents.tasks import run_execution
from approvals.models import Question
from approvals.questions import question_answer
from core import tenancy
from core.models import Agency, Role, User
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import Reply, by_turn, tool_call_reply
from tests.approvals.test_questions import ASK
from tests.factories import AgencyFactory, MembershipFactory
from tests.processes import AsgiServer, Worker, pending_execution

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


def look_at_both_widths(page: Page, name: str, *, phone_fits: bool = True) -> None:
    """Full-page screenshots at 1440 and 390 px (``SHOTS/<name>-1440.png``, ``-390.png``), the
    page left at 1440; no sideways scroll at either width (on the phone unless ``phone_fits`` is
    False: a page with a wide table the phone scrolls on purpose)."""
    for viewport in (DESKTOP, PHONE):
        page.set_viewport_size(viewport)
        if viewport is DESKTOP or phone_fits:
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= viewport["width"], f"{name} scrolls sideways at {viewport['width']} px"
        screenshot(page, f"{name}-{viewport['width']}")
    page.set_viewport_size(DESKTOP)


def agency_member(role: str = Role.ADMIN) -> tuple[Agency, User]:
    """A new agency and a member of it with ``role``."""
    agency = AgencyFactory.create(slug=f"browser-{uuid.uuid4().hex[:8]}")
    return agency, MembershipFactory.create(agency=agency, role=role).user


@dataclass(frozen=True)
class WatchedRun:
    """A run started while a staff member of its agency watched its page (``live``: the page's
    live part)."""

    agent: Agent
    execution: Execution
    user: User
    page: Page
    live: Locator

    def answer(self, text: str) -> None:
        """Answer the question the run waits on, as the watcher (the inbox's service)."""
        with tenancy.agency_context(self.agent.agency_id):
            question = Question.objects.get(execution_id=self.execution.id)
            question_answer(question=question, answer=text, user_id=self.user.id)


def watch_run(browser: Browser, server: AsgiServer, agent: Agent, input_text: str) -> WatchedRun:
    """A new run of ``agent``, its page open and listening live, then started on the worker."""
    execution = pending_execution(agent, input_text=input_text)
    user = MembershipFactory.create(agency_id=agent.agency_id, role=Role.STAFF).user
    page = logged_in(browser, server, user).new_page()
    page.goto(f"{server.url}/admin/agents/execution/{execution.id}/change/")
    live = page.locator("#live-run")
    expect(live.locator("[data-conn]")).to_have_text("live")
    run_execution.delay(str(execution.id), agency_id=str(agent.agency_id))
    return WatchedRun(agent, execution, user, page, live)


@pytest.fixture
def ask_user_run(
    browser: Browser,
    asgi_server: AsgiServer,
    celery_worker: Worker,
    fake_llm_server: FakeProviderServer,
    make_agent: Callable[..., Agent],
) -> Callable[..., WatchedRun]:
    """Starts a watched run that, after the model's replies ``before``, asks a question
    (ask_user: tests.approvals.test_questions.ASK) and waits for the answer; answered, it ends
    4 s later with "The Pro offer it is." (time to read the page before it ends)."""

    def start(*before: Reply) -> WatchedRun:
        agent = make_agent("openai", allowed_tools=["crm_search_contacts", "ask_user"], name="Alex")
        fake_llm_server.set_responder(
            by_turn(
                *before,
                tool_call_reply("ask_user", ASK),
                Reply(text="The Pro offer it is.", latency=4),
            ),
            key=agent.llm_model,
        )
        return watch_run(browser, asgi_server, agent, "Prepare the renewal offer for Zed.")

    return start
