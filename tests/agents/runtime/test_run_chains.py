"""Agents that start each other through events: each run started by another run's event is its
child, one deeper, and the chain stops at AGENTDESK_MAX_RUN_CHAIN_DEPTH instead of running (and
spending) without end. A real worker, the SDK against the fake server, ``trigger_workflow``."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import pytest
from django.conf import settings

from agents.models import Agent, Execution, ExecutionStatus, TriggerLog
from agents.services import execution_create
from core import tenancy
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import by_turn, text_reply, tool_call_reply
from tests.agents.factories import AgentFactory
from tests.processes import Worker, wait_for

pytestmark = pytest.mark.slow


def test_two_agents_that_trigger_each_other_stop_at_the_chain_limit(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    ping = make_agent(allowed_tools=["trigger_workflow"], trigger_events=["ai.workflow.ping"])
    pong = AgentFactory.create(
        agency=ping.agency,
        site=ping.site,
        llm_provider="openai",
        llm_model=f"fake-{uuid.uuid4().hex[:10]}",
        allowed_tools=["trigger_workflow"],
        trigger_events=["ai.workflow.pong"],
    )
    for agent, answer in ((ping, "pong"), (pong, "ping")):
        serve = tool_call_reply("trigger_workflow", {"workflow_id": answer})
        fake_llm_server.set_responder(by_turn(serve, text_reply("Sent.")), key=agent.llm_model)
    with tenancy.agency_context(ping.agency_id):
        first = execution_create(agent=ping, input="Start the rally.")
    assert first is not None

    limit = settings.AGENTDESK_MAX_RUN_CHAIN_DEPTH  # the worker's too: the same settings
    # Runs alternate, ping at even depths; the deepest run's event is turned away by the other.
    turned_away_by = pong if limit % 2 == 0 else ping
    deadline = time.monotonic() + 60
    while True:
        with tenancy.agency_context(ping.agency_id):
            stopped = TriggerLog.objects.filter(
                agent=turned_away_by, skip_reason="chain_too_deep"
            ).first()
        if stopped is not None:
            break
        assert time.monotonic() < deadline, "the chain did not stop"
        time.sleep(0.1)
    assert f"AGENTDESK_MAX_RUN_CHAIN_DEPTH is {limit}" in stopped.skip_detail

    def runs() -> list[Execution]:
        with tenancy.agency_context(ping.agency_id):
            return list(Execution.objects.filter(agency_id=ping.agency_id).order_by("depth"))

    wait_for(runs()[-1])  # the deepest run finishes its own turn
    chain = runs()
    assert [run.depth for run in chain] == list(range(limit + 1))
    assert [run.agent_id for run in chain] == [
        (ping if depth % 2 == 0 else pong).id for depth in range(limit + 1)
    ]
    assert chain[0].parent_id is None
    assert [run.parent_id for run in chain[1:]] == [run.id for run in chain[:-1]]
    assert all(run.status == ExecutionStatus.COMPLETED for run in chain), [
        (run.status, run.error) for run in chain
    ]
