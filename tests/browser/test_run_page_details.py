"""The run page's details a review found rough (issue 27), in Chromium at 1440 and 390 px
(screenshots u9-run-*, none scrolling sideways on the phone): the timeline says a worker picked
the run up, its id only in the line's tooltip; the first step of a run started by a webhook or a
schedule says what started it."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Browser, expect

from agents.models import Execution, ExecutionStatus, StepType
from core import tenancy
from core.models import Role
from tests.agents.factories import (
    ExecutionFactory,
    ExecutionStepFactory,
    StateTransitionFactory,
)
from tests.browser.conftest import logged_in, look_at_both_widths
from tests.factories import MembershipFactory
from tests.processes import AsgiServer

pytestmark = pytest.mark.slow
WORKER = "vm:10370:140699123456"


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
    look_at_both_widths(page, "u9-run-timeline")


TRIGGERS = {
    "webhook": ({"delivery_id": "d1", "payload": {"lead": "Ann"}}, 'a webhook: {"lead":"Ann"}'),
    "schedule": ({"schedule": "0 9 * * 1", "tick_id": "t1"}, "the schedule 0 9 * * 1"),
}


@pytest.mark.parametrize("trigger_type", list(TRIGGERS))
def test_the_first_step_of_a_triggered_run_says_what_started_it(
    browser: Browser,
    asgi_server: AsgiServer,
    live_db: Any,
    trigger_type: str,
) -> None:
    data, summary = TRIGGERS[trigger_type]
    run = ExecutionFactory.create(
        status=ExecutionStatus.COMPLETED, trigger_type=trigger_type, trigger_data=data, input=""
    )
    StateTransitionFactory.create(execution=run, sequence=1, from_state="", to_state="pending")
    ExecutionStepFactory.create(
        execution=run, sequence=2, step_number=1, step_type=StepType.OBSERVE, input_text="",
        tool_input=data,
    )  # fmt: skip
    with tenancy.platform_context():
        Execution.objects.filter(pk=run.pk).update(sequence=2)
    user = MembershipFactory.create(agency=run.agency, role=Role.STAFF).user
    page = logged_in(browser, asgi_server, user).new_page()
    page.goto(f"{asgi_server.url}/admin/agents/execution/{run.pk}/change/")

    observe = page.locator('#live-run .live-step[data-step-type="observe"]')
    expect(observe.locator(".live-step__preview")).to_have_text(f"Started by {summary}")
    observe.locator("summary").click()
    expect(observe.locator(".live-block__label")).to_have_text("Trigger data")
    look_at_both_widths(page, f"u9-run-observe-{trigger_type}")
