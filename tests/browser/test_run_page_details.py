"""The run page's details a review found rough (issue 27), in Chromium at 1440 and 390 px
(screenshots u9-run-*, none scrolling sideways on the phone): the timeline says a worker picked
the run up, its id only in the line's tooltip."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from agents.models import Execution, ExecutionStatus
from core import tenancy
from core.models import Role
from tests.agents.factories import ExecutionFactory, StateTransitionFactory
from tests.browser.conftest import DESKTOP, PHONE, logged_in, screenshot
from tests.factories import MembershipFactory
from tests.processes import AsgiServer

pytestmark = pytest.mark.slow
SCREENS = Path("/work/notes/u9-screens")
WORKER = "vm:10370:140699123456"


def _look(page: Page, name: str) -> None:
    SCREENS.mkdir(parents=True, exist_ok=True)
    for viewport, width_name in ((DESKTOP, "1440"), (PHONE, "390")):
        page.set_viewport_size(viewport)
        if viewport is PHONE:
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= PHONE["width"], f"{name} scrolls sideways on a phone ({width} px)"
        path = screenshot(page, f"u9-{name}-{width_name}")
        (SCREENS / path.name).write_bytes(path.read_bytes())
    page.set_viewport_size(DESKTOP)


def _claimed_run() -> Execution:
    """A run picked up, lost with its worker and taken over, then completed: as the runtime
    records who held it ("claimed by <worker id>")."""
    run = ExecutionFactory.create(status=ExecutionStatus.COMPLETED)
    reasons = [
        ("", "pending", "created"),
        ("pending", "running", f"claimed by {WORKER}"),
        ("running", "running", f"resumed by {WORKER}9 after its worker was lost"),
        ("running", "completed", "final_answer"),
    ]
    for sequence, (start, to, reason) in enumerate(reasons, start=1):
        StateTransitionFactory.create(
            execution=run, sequence=sequence, from_state=start, to_state=to,
            transition_reason=reason,
        )  # fmt: skip
    with tenancy.platform_context():
        Execution.objects.filter(pk=run.pk).update(sequence=len(reasons))
    return run


def test_the_timeline_says_a_worker_picked_the_run_up_with_its_id_in_the_tooltip(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    run = _claimed_run()
    user = MembershipFactory.create(agency=run.agency, role=Role.STAFF).user
    page = logged_in(browser, asgi_server, user).new_page()
    page.goto(f"{asgi_server.url}/admin/agents/execution/{run.pk}/change/")

    reasons = page.locator("#live-run .live-state__reason")
    picked = reasons.filter(has_text="picked up by a worker")
    expect(picked).to_have_count(1)
    expect(picked).to_have_attribute("title", f"Worker {WORKER}")
    taken = reasons.filter(has_text="taken over by a worker after its worker was lost")
    expect(taken).to_have_attribute("title", f"Worker {WORKER}9")
    expect(reasons.filter(has_text="final answer")).to_have_count(1)
    expect(page.locator("#live-run")).not_to_contain_text(WORKER)
    _look(page, "run-timeline")
