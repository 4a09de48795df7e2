"""SIGKILL of a worker at every point of the loop: another delivery (re-sent by the lease reaper)
finishes the run, a persisted model reply is never requested again, and no tool is applied
twice. Real worker processes, real PostgreSQL and Redis, the OpenAI and Anthropic SDKs against the
fake server."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest

from agents.models import Agent, Execution, ExecutionStatus
from agents.services import execution_create
from agents.tasks import reap_expired_leases
from core import tenancy
from crm.models import Contact, Note
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import Reply, by_turn, text_reply, tool_call_reply
from tests.processes import Worker, wait_for
from tools.models import ToolCall
from usage.models import Budget, ModelPrice

pytestmark = pytest.mark.slow
LEASE_SECONDS = 3  # the test workers' AGENTDESK_LEASE_SECONDS
KINDS = ["openai", "anthropic", "google"]

# crash point -> model requests in all (3 turns; +1 when the killed reply was not persisted)
CRASH_POINTS = {
    "model_replied": 4,
    "think_uncommitted": 4,
    "think_committed": 3,
    "tool_uncommitted": 3,
    "tool_commit_sent": 3,  # committed or not, the reply that called the tool was persisted
    "tool_committed": 3,
}


def _scripted_agent(
    make_agent: Callable[..., Agent],
    server: FakeProviderServer,
    kind: str,
    first_latency: float = 0.0,
) -> tuple[Agent, Contact]:
    # A time limit shorter than the time the run lies dead before the reaper takes it over:
    # only the time a worker spent on it counts, so the resumed run still completes.
    agent = make_agent(kind, allowed_tools=["crm_*"], timeout_seconds=LEASE_SECONDS)
    with tenancy.agency_context(agent.agency_id):
        contact = Contact.objects.create(
            agency_id=agent.agency_id, first_name="Grace", email="grace@example.com"
        )
    add_note = tool_call_reply(
        "crm_add_note", {"contact_id": str(contact.id), "content": "Renewal call booked."}
    )
    first = Reply(tool_calls=add_note.tool_calls, latency=first_latency or None)
    server.set_responder(
        by_turn(
            first,
            tool_call_reply("crm_get_contact", {"email": "grace@example.com"}),
            text_reply("Done."),
        ),
        key=agent.llm_model,
    )
    return agent, contact


def _start_on(queue: str, agent: Agent) -> Execution:
    with tenancy.agency_context(agent.agency_id):
        execution = execution_create(agent=agent, input="Book the renewal.", queue=queue)
    assert execution is not None
    return execution


def _kill_during_the_first_model_call(
    agent: Agent,
    server: FakeProviderServer,
    meanwhile: Callable[[Execution], None] | None = None,
) -> Execution:
    """Start a run on a worker of its own and SIGKILL it while the model is still answering its
    first call (the script's first reply must take a while); ``meanwhile`` looks first."""
    queue = f"crash-{uuid.uuid4().hex[:8]}"
    doomed = Worker(queue=queue).start()
    try:
        execution = _start_on(queue, agent)
        deadline = time.monotonic() + 30
        while not server.requests_for(agent.llm_model):
            assert time.monotonic() < deadline, "the model was never called"
            time.sleep(0.02)
        if meanwhile is not None:
            meanwhile(execution)
        doomed.kill()
    finally:
        doomed.kill()
    return execution


def _resume_after_lease_expiry(execution: Execution) -> Execution:
    """What beat does: once the dead worker's lease runs out, the reaper re-delivers the run
    (to the default queue, served by the session's healthy worker)."""
    time.sleep(LEASE_SECONDS + 0.5)
    assert reap_expired_leases() >= 1
    return wait_for(execution)


def _assert_completed_once(execution: Execution, contact: Contact) -> None:
    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    with tenancy.agency_context(execution.agency_id):
        notes = Note.objects.filter(contact=contact).count()
        calls = list(
            ToolCall.objects.filter(execution=execution).values_list("tool_name", "status")
        )
    assert notes == 1  # the note tool was applied exactly once
    assert sorted(calls) == [("crm_add_note", "completed"), ("crm_get_contact", "completed")]
    assert execution.attempts == 2


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("point", list(CRASH_POINTS))
def test_worker_killed_at_a_crash_point_and_the_run_completes(
    point: str,
    kind: str,
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent, contact = _scripted_agent(make_agent, fake_llm_server, kind)
    queue = f"crash-{uuid.uuid4().hex[:8]}"
    # Configured as in production (the test workers turn the catalogue cache off): with it,
    # the last tool result's commit is collected in the model call's before-send hook, where
    # tool_committed then kills the worker.
    doomed = Worker(
        queue=queue, AGENTDESK_CRASH_AT=point, AGENTDESK_CATALOGUE_CACHE_SECONDS="30"
    ).start()
    try:
        execution = _start_on(queue, agent)
        assert doomed.wait_exit(60) == -9, doomed.output()[-2000:]
    finally:
        doomed.kill()
    execution = _resume_after_lease_expiry(execution)
    _assert_completed_once(execution, contact)
    assert len(fake_llm_server.requests_for(agent.llm_model)) == CRASH_POINTS[point]


@pytest.mark.parametrize("kind", KINDS)
def test_worker_killed_during_the_model_call_and_the_run_completes(
    kind: str,
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent, contact = _scripted_agent(make_agent, fake_llm_server, kind, first_latency=1.5)
    execution = _kill_during_the_first_model_call(agent, fake_llm_server)
    execution = _resume_after_lease_expiry(execution)
    _assert_completed_once(execution, contact)
    # The killed call had no persisted reply, so it was made once more.
    assert len(fake_llm_server.requests_for(agent.llm_model)) == 4


def test_a_worker_killed_during_a_budgeted_model_call_leaves_no_reservation_behind(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    """The call's reservation is committed before the call; the worker dies during it. The
    run's next claim gives it back: the day's budget ends with only what the calls cost."""
    agent, contact = _scripted_agent(make_agent, fake_llm_server, "openai", first_latency=1.5)
    with tenancy.agency_context(agent.agency_id):
        Budget.objects.create(agency_id=agent.agency_id, limit_usd=Decimal(5))
        ModelPrice.objects.create(
            agency_id=agent.agency_id,
            provider="openai",
            model=agent.llm_model,
            input_per_mtok=Decimal(3),
            output_per_mtok=Decimal(15),
        )
    held: list[Any] = []

    def reservation_before_the_kill(execution: Execution) -> None:
        with tenancy.agency_context(agent.agency_id):
            held.append(Execution.objects.get(pk=execution.pk).budget_reservation)

    execution = _kill_during_the_first_model_call(
        agent, fake_llm_server, meanwhile=reservation_before_the_kill
    )
    assert held[0] is not None  # committed before the call
    assert Decimal(held[0]["amount"]) > 0
    execution = _resume_after_lease_expiry(execution)
    _assert_completed_once(execution, contact)
    with tenancy.agency_context(agent.agency_id):
        budget = Budget.objects.get(agency_id=agent.agency_id)
    assert execution.budget_reservation is None
    assert budget.reserved_usd == 0
    assert budget.used_usd == execution.cost_usd > 0
