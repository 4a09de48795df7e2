"""Outbound webhooks through a real Celery worker (the notify queue): a run completes while the
receiver holds its ai.execution.completed delivery; the attempt times out
(AGENTDESK_OUTBOUND_WEBHOOK_TIMEOUT_SECONDS, 3 s in the test settings), the retry (ETA on the
queue) finds the receiver back and succeeds, every request signed as Standard Webhooks says."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from standardwebhooks import Webhook as Verifier

from agents.models import Agent, ExecutionStatus
from agents.services.start import execution_create
from core import tenancy
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import by_turn, text_reply
from tests.processes import Worker, wait_for
from tests.webhooks.receiver import Receiver
from webhooks.outbound.models import Delivery, DeliveryAttempt, DeliveryStatus
from webhooks.outbound.services import subscription_create

pytestmark = pytest.mark.slow


def _deliveries(agent: Agent, timeout: float = 30) -> dict[str, Delivery]:
    """The run's two deliveries by event type, once neither is pending."""
    deadline = time.monotonic() + timeout
    while True:
        with tenancy.agency_context(agent.agency_id):
            found = list(Delivery.objects.prefetch_related("attempt_log"))
        if len(found) == 2 and all(d.status != DeliveryStatus.PENDING for d in found):
            return {d.event_type: d for d in found}
        assert time.monotonic() < deadline, f"deliveries still pending: {found}"
        time.sleep(0.1)


def _first_attempt_logged(agent: Agent, event_type: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with tenancy.agency_context(agent.agency_id):
            if DeliveryAttempt.objects.filter(delivery__event_type=event_type).exists():
                return
        assert time.monotonic() < deadline, f"no attempt of the {event_type} delivery"
        time.sleep(0.1)


def test_a_run_completes_while_the_receiver_hangs_and_the_retry_delivers(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = make_agent()
    fake_llm_server.set_responder(by_turn(text_reply("All done.")), key=agent.llm_model)
    with Receiver(200, hang_type="ai.execution.started").running() as receiver:
        with tenancy.agency_context(agent.agency_id):
            _, secret = subscription_create(
                agency_id=agent.agency_id,
                name="ops",
                url=receiver.url,
                event_types=["ai.execution.started", "ai.execution.completed"],
            )
            execution = execution_create(agent=agent, input="Finish up.")
        assert execution is not None
        # The run's first delivery is held by the receiver, and the run goes on to its end.
        assert receiver.hanging.wait(30)
        done = wait_for(execution)
        assert done.status == ExecutionStatus.COMPLETED, done.error
        _first_attempt_logged(agent, "ai.execution.started")  # it gave up waiting (timeout)
        receiver.release()
        deliveries = _deliveries(agent)

    started, completed = deliveries["ai.execution.started"], deliveries["ai.execution.completed"]
    assert started.status == completed.status == DeliveryStatus.SUCCEEDED
    held = [a.status_code for a in started.attempt_log.all()]
    assert held == [None, 200], started.last_error
    assert "too long" in started.attempt_log.all()[0].error
    assert [a.status_code for a in completed.attempt_log.all()] == [200]
    assert completed.payload["data"]["execution_id"] == str(execution.id)
    assert len(receiver.received) == 3
    for request in receiver.received:
        body = Verifier(secret).verify(request.body, request.headers)
        assert body["data"]["execution_id"] == str(execution.id)
