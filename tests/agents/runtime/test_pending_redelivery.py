"""A run whose Celery message was lost (apply_async failed after the commit, or the message went
with a worker that died before its ack) stays pending: beat's reaper delivers it again once it
has been pending for AGENTDESK_PENDING_REDELIVER_SECONDS, and only once per such period.

A lost delivery is reproduced for real: the run is sent to a queue no worker listens to.
What the reaper sends is read from Celery's own publish signal."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from celery.signals import after_task_publish
from django.db import transaction
from django.utils import timezone
from pytest_django.fixtures import Settings

from agents.models import Agent, Execution, ExecutionStatus
from agents.services import execution_create
from agents.tasks import reap_expired_leases
from core import tenancy
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import by_turn, text_reply
from tests.processes import Worker, wait_for

pytestmark = pytest.mark.slow
REDELIVER_SECONDS = 60


@pytest.fixture
def published() -> Iterator[list[str]]:
    """Ids of the executions whose run task this process publishes from now on."""
    ids: list[str] = []

    def record(sender: Any = None, body: Any = None, **kwargs: Any) -> None:
        if sender == "agents.run_execution":
            args = body[0]  # protocol 2: (args, kwargs, embed)
            ids.append(str(args[0]))

    after_task_publish.connect(record, weak=False)
    yield ids
    after_task_publish.disconnect(record)


@pytest.fixture
def lost_run(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    settings: Settings,
) -> Execution:
    """A pending run whose only delivery went to a queue nobody consumes."""
    settings.AGENTDESK_PENDING_REDELIVER_SECONDS = REDELIVER_SECONDS
    agent = make_agent("openai")
    fake_llm_server.set_responder(by_turn(text_reply("Done.")), key=agent.llm_model)
    with tenancy.agency_context(agent.agency_id):
        execution = execution_create(
            agent=agent, input="Say done.", queue=f"nobody-listens-{uuid.uuid4().hex[:8]}"
        )
    assert execution is not None
    return execution


def _pending_for(execution: Execution, seconds: float) -> None:
    """As if the run had become pending ``seconds`` ago."""
    with tenancy.agency_context(execution.agency_id):
        updated = Execution.objects.filter(pk=execution.pk).update(
            updated_at=timezone.now() - datetime.timedelta(seconds=seconds)
        )
    assert updated == 1


def _status(execution: Execution) -> str:
    with tenancy.agency_context(execution.agency_id):
        return Execution.objects.get(pk=execution.pk).status


def test_a_run_pending_too_long_is_delivered_again_and_completes(
    lost_run: Execution, published: list[str], celery_worker: Worker
) -> None:
    run_id = str(lost_run.id)
    reap_expired_leases()
    assert run_id not in published  # pending for a moment only: its message may be queued
    assert _status(lost_run) == ExecutionStatus.PENDING

    _pending_for(lost_run, REDELIVER_SECONDS + 5)
    reap_expired_leases()
    assert published.count(run_id) == 1
    execution = wait_for(lost_run)
    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    assert execution.output == "Done."
    assert execution.attempts == 1


def test_a_run_delivered_again_is_not_sent_again_at_the_next_tick(
    lost_run: Execution, published: list[str], celery_worker: Worker
) -> None:
    run_id = str(lost_run.id)
    _pending_for(lost_run, REDELIVER_SECONDS + 5)
    # Two ticks in one transaction: the first tick's row lock holds until it ends, so its new
    # delivery cannot claim the run yet (it exits "not_claimed") and the second tick still finds
    # the run pending, as it would find a run whose new message waits in a busy queue.
    with transaction.atomic():
        reap_expired_leases()
        reap_expired_leases()
    assert published.count(run_id) == 1

    # A period later it is sent again, and that delivery runs it.
    _pending_for(lost_run, REDELIVER_SECONDS + 5)
    reap_expired_leases()
    execution = wait_for(lost_run)
    assert execution.status == ExecutionStatus.COMPLETED, execution.error
