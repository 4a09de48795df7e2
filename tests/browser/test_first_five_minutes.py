"""The README's first five minutes, as a newcomer does them: log in, land on the staff home,
open the SDR agent, press "Try it", watch the run think, call tools and wait for an approval
live; once approved, the home shows it completed, and its cost in the chart. The demo agency's
data and the demo model are those `manage.py up` seeds and starts; a real worker runs the agent.
The screenshots are the README's (docs/img/)."""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from django.conf import settings
from django.db.models import Sum
from playwright.sync_api import Browser, expect

from agents.models import Execution
from approvals.models import Approval
from approvals.services import approval_decide
from core import realtime, tenancy
from core.models import Role
from core.realtime import listening
from devkit.demo import demo_data_seed
from devkit.fake_server import RecordedRequest, Step
from devkit.fake_server.demo import DemoModelServer, demo_responder
from memory.learning.models import RunQuality
from tests.browser.conftest import DESKTOP, PHONE, screenshot
from tests.factories import AgencyFactory, MembershipFactory, SiteFactory
from tests.processes import AsgiServer, Worker, wait_for
from usage.models import UsageDaily
from usage.templatetags.usage_format import usd

pytestmark = pytest.mark.slow
PASSWORD = "pw-for-tests"
# Sets window.__sawStreaming once the run's page shows a model call's text as it streams, however
# briefly (on a busy machine a short stream can come and go between two of expect()'s looks).
SAW_STREAMING = """
document.addEventListener("DOMContentLoaded", () => {
    new MutationObserver((records, observer) => {
        if (document.querySelector("#live-run .live-step--streaming")) {
            window.__sawStreaming = true;
            observer.disconnect();
        }
    }).observe(document.body, {childList: true, subtree: true});
});
"""


@pytest.fixture(scope="module")
def demo_model() -> Iterator[DemoModelServer]:
    with DemoModelServer() as server:
        yield server


def _answering_once_watched(server: DemoModelServer) -> threading.Event:
    """The demo model (thinking pauses and streamed text as in `up`, a little faster) holds its
    answers until the returned event is set. The run starts when the button is pressed, and on
    a busy machine its calls could all be made before the page connects: unwatched, unstreamed."""
    watched = threading.Event()
    respond = demo_responder(think_seconds=0.4, stream_interval=0.03)

    def when_watched(request: RecordedRequest) -> Step:
        watched.wait(60)
        return respond(request)

    server.set_responder(when_watched)
    return watched


def _wait_until_watched(execution_id: str) -> None:
    """Until the run's page listens to the run's group, then as long again as the worker may
    take to notice (it looks every AGENTDESK_TOKEN_WATCH_SECONDS): its next calls stream."""
    group = realtime.execution_group(execution_id)
    listeners = listening.Listeners()
    listeners.register(group)
    try:
        deadline = time.monotonic() + 20
        while not listeners.listened(group):
            assert time.monotonic() < deadline, "the run's page never listened"
            time.sleep(0.05)
    finally:
        listeners.unregister(group)
    time.sleep(2 * settings.AGENTDESK_TOKEN_WATCH_SECONDS)


def _spent_once_scored(execution: Execution) -> Decimal:
    """The agency's usage cost once the run's after-run work is done (its score is written)."""
    deadline = time.monotonic() + 30
    with tenancy.agency_context(execution.agency_id):
        while not RunQuality.objects.filter(execution_id=execution.id).exists():
            assert time.monotonic() < deadline, "the run was never scored"
            time.sleep(0.1)
        spent = UsageDaily.objects.filter(agency_id=execution.agency_id).aggregate(
            total=Sum("cost_usd")
        )["total"]
    return Decimal(spent)


def test_a_newcomer_runs_the_sdr_agent_and_watches_it_live(
    browser: Browser,
    asgi_server: AsgiServer,
    celery_worker: Worker,
    demo_model: DemoModelServer,
    live_db: Any,
) -> None:
    agency = AgencyFactory.create(name="Demo Agency")
    SiteFactory.create(agency=agency, name="Demo Agency main site")
    demo_data_seed(agency=agency, model_url=demo_model.openai_base_url)
    watched = _answering_once_watched(demo_model)
    username = f"newcomer-{uuid.uuid4().hex[:6]}"
    user = MembershipFactory.create(
        agency=agency, role=Role.ADMIN, user__username=username, user__email="demo@example.com"
    ).user

    context = browser.new_context(viewport=DESKTOP)
    context.add_init_script(SAW_STREAMING)
    page = context.new_page()
    page.goto(f"{asgi_server.url}/admin/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    page.keyboard.press("Enter")
    home = page.locator("#staff-home")
    expect(home).to_be_visible()
    expect(home.locator("[data-live-state]")).to_have_attribute("data-live-state", "open")

    # Sidebar links read "<icon ligature> Agents".
    page.get_by_role("link", name=re.compile(r"(^|\s)Agents$")).first.click()
    page.get_by_role("link", name="SDR Agent", exact=True).click()
    page.get_by_role("link", name=re.compile("Try it$")).click()
    page.locator("textarea[name=input]:visible").fill(
        "Reach out to Priya Raman about her pricing question."
    )
    page.get_by_role("button", name="Start the run").click()

    # The run's page, loaded: a navigation (30 s at most), not a 5 s assertion on the address.
    page.wait_for_url(re.compile(r"/admin/agents/execution/[0-9a-f-]+/change/"))
    execution_id = page.url.rstrip("/").split("/")[-2]
    live = page.locator("#live-run")
    expect(live.locator("[data-conn]")).to_have_text(re.compile("live|finished"))
    _wait_until_watched(execution_id)
    watched.set()
    page.wait_for_function("window.__sawStreaming === true", timeout=20_000)
    acts = live.locator(".live-step--act")
    expect(acts.filter(has_text="crm_search_contacts")).to_have_count(1, timeout=20_000)
    expect(live.locator('[data-field="status"]')).to_have_text(
        "Waiting for approval", timeout=30_000
    )
    expect(live.locator('[data-field="waiting"]')).to_contain_text("email_send")
    expect(live.get_by_role("link", name="Review and decide")).to_be_visible()
    screenshot(page, "demo-run", full_page=False)

    page.get_by_role("link", name=re.compile(r"(^|\s)Home(\s\d+)?$")).first.click()
    expect(home.locator("#home-in-progress")).to_contain_text("SDR Agent")
    expect(home.locator("#home-waiting")).to_contain_text("email_send")
    screenshot(page, "home", full_page=False)
    page.evaluate("window.__sameDocument = true")

    with tenancy.agency_context(agency.id):
        approval = Approval.objects.get(execution_id=execution_id)
        approval_decide(approval=approval, approve=True, user_id=user.pk, reason="Looks good.")
    with tenancy.agency_context(agency.id):
        execution = wait_for(Execution.objects.get(pk=execution_id))
    assert execution.status == "completed", execution.error
    assert execution.cost_usd > Decimal(0)  # the demo model's illustrative price

    recent = home.locator("#home-recent")
    expect(recent).to_contain_text("SDR Agent", timeout=15_000)
    expect(recent).to_contain_text("Completed")
    assert page.evaluate("window.__sameDocument") is True  # the panels updated in place
    # The run's cost is in the chart: the home reloaded from here shows it in the 14 days, with
    # what the work after the run spent (its memories and quality judge call the model too:
    # memory.after_run), once that is done: the run has its quality score.
    spent = _spent_once_scored(execution)
    assert spent >= execution.cost_usd
    page.reload()
    expect(home.locator("#home-charts")).to_contain_text(f"Cost, last 14 days: {usd(spent)}")
    screenshot(page, "home-after-the-run")

    page.set_viewport_size(PHONE)
    page.goto(f"{asgi_server.url}/admin/agents/execution/{execution_id}/change/")
    expect(live.locator('[data-field="status"]')).to_have_text("Completed")
    # Measured once drawn: the diagrams are drawn after the page loads.
    expect(page.locator('[data-flow-diagram][data-rendered="true"]')).to_have_count(
        2, timeout=20_000
    )
    wide = page.evaluate(
        """limit => [...document.querySelectorAll("body *")]
            .filter(e => e.getBoundingClientRect().right > limit)
            .slice(0, 8)
            .map(e => `${e.tagName}.${e.className} ${e.getBoundingClientRect().right}`)""",
        PHONE["width"] + 1,
    )
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"] + 1, wide
    screenshot(page, "demo-run-phone", full_page=False)
    context.close()
