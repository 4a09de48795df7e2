"""The run page (issue 27 item 1): statuses named as people say them, a run that ends while
watched updates its title and actions with no reload, one timeline with each step folded (no
admin tables repeating it), and "Retry from here" only where a retry keeps something."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from playwright.sync_api import Browser, Page, expect

from agents import lifecycle
from agents.models import Agent, Execution, ExecutionStatus
from agents.runtime.loop import run_execution
from agents.tasks import run_execution as run_execution_task
from core import realtime, tenancy
from core.models import Role, User
from crm.models import Contact
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import (
    Reply,
    ScriptedToolCall,
    by_turn,
    text_reply,
    tool_call_reply,
)
from tests.browser.conftest import DESKTOP, PHONE, logged_in, screenshot
from tests.factories import MembershipFactory
from tests.processes import AsgiServer, Worker, pending_execution, wait_for

pytestmark = pytest.mark.slow

EMAIL = "ada@example.com"
# A run of 40 steps: the trigger's observe, 19 lookups (a reply and its tool's result each), the
# answer.
LOOKUPS = 19
# That run's page at 1440 px was 23,547 px tall (38,142 at 390) while four admin tables repeated
# its timeline (measured on b27d41c); the issue saw 7,800-9,400 px for shorter runs.
HEIGHT_BEFORE = 23_547
# (Folded away, so not a "link" to Playwright's roles until its step is opened.)
RETRY = "a:text-is('Retry from here')"


def _url(server: AsgiServer, execution: Execution) -> str:
    return f"{server.url}/admin/agents/execution/{execution.pk}/change/"


def _staff(agent: Agent) -> User:
    return MembershipFactory.create(agency_id=agent.agency_id, role=Role.STAFF).user


def _in_status(agent: Agent, status: str) -> Execution:
    """A run left in ``status`` (through the statuses that lead there), no worker involved."""
    execution = pending_execution(agent, input_text="Look Ada up.")
    with tenancy.agency_context(agent.agency_id):
        if status != ExecutionStatus.PENDING:
            lifecycle.record_transition(execution, ExecutionStatus.RUNNING, reason="test")
        if status not in (ExecutionStatus.PENDING, ExecutionStatus.RUNNING):
            lifecycle.record_transition(execution, status, reason="test")
        execution.save()
    return execution


def _ran(agent: Agent, fake: FakeProviderServer, *replies: Reply) -> Execution:
    """A run of ``agent`` through the real runtime in this thread: the replies in turn (a
    request past them answers 400, which fails the run)."""
    fake.set_responder(by_turn(*replies), key=agent.llm_model)
    execution = pending_execution(agent, input_text=f"Look {EMAIL} up.")
    run_execution(execution.id, agency_id=execution.agency_id)
    realtime.flush()
    with tenancy.agency_context(agent.agency_id):
        return Execution.objects.get(pk=execution.pk)


def _lookup_agent(make_agent: Callable[..., Agent], **fields: object) -> Agent:
    # (The lookups repeat one call on purpose: loop detection would stop the run.)
    agent = make_agent("openai", allowed_tools=["crm_*", "ask_user"], loop_threshold=0, **fields)
    with tenancy.agency_context(agent.agency_id):
        Contact.objects.create(
            agency_id=agent.agency_id, site_id=agent.site_id, email=EMAIL, first_name="Ada"
        )
    return agent


def _opened(page: Page, url: str) -> None:
    page.goto(url)
    expect(page.locator("#live-run [data-conn]")).to_have_text(re.compile("live|finished"))


def _shoot(page: Page, name: str) -> None:
    """Full-page shots at 1440 and 390 px; the page never scrolls sideways on a phone."""
    page.set_viewport_size(DESKTOP)
    screenshot(page, f"run-page-{name}-desktop")
    page.set_viewport_size(PHONE)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    screenshot(page, f"run-page-{name}-phone")
    page.set_viewport_size(DESKTOP)


def test_the_badge_and_title_name_every_status_with_its_label(
    browser: Browser, asgi_server: AsgiServer, make_agent: Callable[..., Agent]
) -> None:
    """``waiting_agent`` reads "Waiting for another agent" (the README's words), and so on for
    every status: the badge (drawn again from the socket's snapshot) and the title."""
    agent = make_agent("openai", name="Orchestrator")
    context = logged_in(browser, asgi_server, _staff(agent))
    page = context.new_page()
    for status, label in ExecutionStatus.choices:
        execution = _in_status(agent, status)
        _opened(page, _url(asgi_server, execution))
        live = page.locator("#live-run")
        expect(live.locator('[data-field="status"]')).to_have_text(label)
        expect(page.locator("#header-inner h1")).to_contain_text(
            f"Execution {str(execution.pk)[:8]} ({label.lower()})"
        )
        expect(page).to_have_title(re.compile(re.escape(f"({label.lower()})")))
        # The timeline's state changes too.
        expect(live.locator(".live-state .live-badge").last).to_have_text(label)
        if status == ExecutionStatus.WAITING_AGENT:
            _shoot(page, "waiting-agent")
    context.close()


def test_a_run_ending_while_watched_updates_the_title_and_shows_replay_without_a_reload(
    browser: Browser,
    asgi_server: AsgiServer,
    celery_worker: Worker,
    fake_llm_server: FakeProviderServer,
    make_agent: Callable[..., Agent],
) -> None:
    """The title and the actions follow the status the socket reports, not a copy of the page
    fetched again: here no such fetch gets an answer (as when the page was slow to build), and
    the title still says the run completed, Cancel goes, and Replay and the steps' Retry show."""
    agent = _lookup_agent(make_agent)
    fake_llm_server.set_responder(
        by_turn(
            Reply(tool_calls=(ScriptedToolCall("crm_get_contact", {"email": EMAIL}),), latency=1),
            Reply(text="Ada is on file.", latency=1.5),
        ),
        key=agent.llm_model,
    )
    execution = pending_execution(agent, input_text=f"Look {EMAIL} up.")
    context = logged_in(browser, asgi_server, _staff(agent))
    page = context.new_page()
    url = _url(asgi_server, execution)
    _opened(page, url)
    expect(page.locator("#header-inner h1")).to_contain_text("(pending)")
    expect(page.locator("[data-run-tool=cancel]")).to_be_visible()
    expect(page.locator("[data-run-tool=replay]")).to_be_hidden()
    # The page's own address answers nothing from now on (the first load is done).
    page.route(url, lambda route: route.abort())
    page.evaluate("window.__sameDocument = true")

    run_execution_task.delay(str(execution.id), agency_id=str(agent.agency_id))

    live = page.locator("#live-run")
    expect(live.locator('[data-field="status"]')).to_have_text("Running", timeout=15_000)
    expect(page.locator("#header-inner h1")).to_contain_text("(running)")
    expect(live.locator(".live-step--act")).to_have_count(1, timeout=15_000)
    _shoot(page, "running")
    expect(live.locator('[data-field="status"]')).to_have_text("Completed", timeout=20_000)
    expect(page.locator("#header-inner h1")).to_contain_text(
        f"Execution {str(execution.pk)[:8]} (completed)"
    )
    expect(page.locator("#content")).to_contain_text(str(execution.pk))  # the whole id, to copy
    expect(page).to_have_title(re.compile(r"\(completed\)"))
    expect(page.locator("[data-run-tool=cancel]")).to_have_count(0)
    expect(page.locator("[data-run-tool=replay]")).to_be_visible()
    expect(live.locator(".live-step--act").locator(RETRY)).to_have_count(1)
    assert page.evaluate("window.__sameDocument") is True  # never reloaded
    assert wait_for(execution).status == ExecutionStatus.COMPLETED
    context.close()


def test_one_timeline_with_folded_steps_and_no_tables_repeating_it(
    browser: Browser,
    asgi_server: AsgiServer,
    fake_llm_server: FakeProviderServer,
    make_agent: Callable[..., Agent],
) -> None:
    """A 40-step run: its steps once, in the live view's timeline, each a line that unfolds;
    no admin tables (steps, tool calls, state transitions, decision points) below; what only
    they showed is one link away, filtered to the run; the page well under its old height."""
    agent = _lookup_agent(make_agent, max_steps_per_run=100)
    lookup = tool_call_reply("crm_get_contact", {"email": EMAIL})
    execution = _ran(agent, fake_llm_server, *[lookup] * LOOKUPS, text_reply("Ada is on file."))
    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    with tenancy.agency_context(agent.agency_id):
        assert execution.steps.count() == 40
    context = logged_in(browser, asgi_server, _staff(agent))
    page = context.new_page()
    _opened(page, _url(asgi_server, execution))
    live = page.locator("#live-run")
    steps = live.locator(".live-timeline .live-step")
    expect(steps).to_have_count(40)
    expect(live.locator(".live-step details.live-step__details")).to_have_count(40)
    expect(live.locator(".live-step details[open]")).to_have_count(0)
    expect(page.locator(".inline-group, table.formset, [id$='-group']")).to_have_count(0)
    # A step unfolds to its arguments, result and the link to its row.
    act = live.locator(".live-step--act").first
    expect(act.locator(".live-block").first).not_to_be_visible()
    act.locator("summary").click()
    expect(act.locator(".live-block", has_text="Arguments")).to_be_visible()
    expect(act.locator(".live-block", has_text="Result")).to_contain_text("Ada")
    expect(act.get_by_role("link", name="Step in the admin")).to_be_visible()
    related = page.locator(".field-line").filter(
        has=page.locator("label", has_text=re.compile("^Related$"))
    )
    for name in ("steps", "tool calls", "state transitions", "decision points"):
        expect(related.get_by_role("link", name=name, exact=True)).to_be_visible()
    _shoot(page, "completed")
    height = page.evaluate("document.documentElement.scrollHeight")
    assert height < HEIGHT_BEFORE / 4, height
    # The step's row, from its link: the one step, with its tool call.
    act.get_by_role("link", name="Step in the admin").click()
    expect(page.locator("#result_list tbody tr")).to_have_count(1)
    context.close()


def test_retry_from_here_is_on_every_step_of_an_ended_run_but_the_first_observe(
    browser: Browser,
    asgi_server: AsgiServer,
    fake_llm_server: FakeProviderServer,
    make_agent: Callable[..., Agent],
) -> None:
    """Step 1 observes the trigger: a retry from it would keep nothing. The others keep the
    run's history up to them, so they offer it (a failed run's too); a run waiting for an
    answer has not ended, so none do."""
    agent = _lookup_agent(make_agent)
    lookup = tool_call_reply("crm_get_contact", {"email": EMAIL})
    failed = _ran(agent, fake_llm_server, lookup)  # the second model call answers 400
    assert failed.status == ExecutionStatus.FAILED
    context = logged_in(browser, asgi_server, _staff(agent))
    page = context.new_page()
    _opened(page, _url(asgi_server, failed))
    live = page.locator("#live-run")
    steps = live.locator(".live-timeline .live-step")
    expect(steps).to_have_count(3)  # observe, think, act
    expect(page.locator("a[href$='/retry/1/']")).to_have_count(0)  # nowhere on the page
    first = steps.first
    expect(first).to_have_class(re.compile("live-step--observe"))
    expect(first.locator("a")).to_have_count(1)  # its row's link: the links are drawn
    expect(first.locator(RETRY)).to_have_count(0)
    for index in (1, 2):
        link = steps.nth(index).locator(RETRY)
        expect(link).to_have_count(1)
        expect(link).to_have_attribute("href", re.compile(f"/retry/{index + 1}/$"))
    _shoot(page, "failed")
    steps.nth(1).locator("summary").click()
    steps.nth(1).get_by_role("link", name="Retry from here").click()
    expect(page.get_by_role("button", name="Retry from step 2")).to_be_visible()

    waiting = _ran(
        agent,
        fake_llm_server,
        lookup,
        tool_call_reply("ask_user", {"question": "Which Ada do you mean?"}),
    )
    assert waiting.status == ExecutionStatus.WAITING_INPUT
    _opened(page, _url(asgi_server, waiting))
    expect(live.locator('[data-field="waiting"]')).to_contain_text("Which Ada do you mean?")
    expect(live.locator(".live-step--act").first).to_be_visible()
    expect(live.locator(".live-step a").first).to_have_text("Step in the admin")
    expect(live.locator(RETRY)).to_have_count(0)
    _shoot(page, "waiting")
    context.close()
