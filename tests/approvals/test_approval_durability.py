"""A worker SIGKILLed right after an approval, while it runs the approved action: another
delivery finishes the run and the action is applied exactly once. Real worker processes, the
fake provider server, real PostgreSQL and Redis."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from agents.models import Agent, ExecutionStatus
from agents.services import execution_create
from agents.services.start import RUN_TASK
from agents.tasks import reap_expired_leases
from approvals.models import Approval, ApprovalStatus
from approvals.services import approval_decide
from config.celery_app import app
from core import tenancy
from crm.models import Contact, Note
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import by_turn, text_reply, tool_call_reply
from tests.processes import Worker, wait_for
from tools.models import ToolCall

pytestmark = pytest.mark.slow
LEASE_SECONDS = 3  # the test workers' AGENTDESK_LEASE_SECONDS
APPROVE_NOTES = {"type": "require_approval", "tools": ["crm_add_note"]}


@pytest.mark.parametrize("point", ["tool_uncommitted", "tool_committed"])
def test_a_worker_killed_while_running_the_approved_action_applies_it_once(
    point: str,
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    agent = make_agent(
        allowed_tools=["crm_*"], constraints=[APPROVE_NOTES], timeout_seconds=LEASE_SECONDS
    )
    with tenancy.agency_context(agent.agency_id):
        contact = Contact.objects.create(agency_id=agent.agency_id, first_name="Ada")
    fake_llm_server.set_responder(
        by_turn(
            tool_call_reply(
                "crm_add_note", {"contact_id": str(contact.id), "content": "Renewal agreed."}
            ),
            text_reply("Noted."),
        ),
        key=agent.llm_model,
    )
    with tenancy.agency_context(agent.agency_id):
        execution = execution_create(agent=agent, input="Note the renewal.")
    assert execution is not None
    execution = wait_for(execution, {"waiting_approval"})
    assert execution.status == ExecutionStatus.WAITING_APPROVAL

    # The approval's delivery goes to a worker of its own, which dies at ``point`` while it
    # runs the approved call.
    queue = f"crash-{uuid.uuid4().hex[:8]}"
    send_task = app.send_task

    def to_the_doomed_worker(name: str, *args: Any, **options: Any) -> Any:
        if name == RUN_TASK:
            options["queue"] = queue
        return send_task(name, *args, **options)

    monkeypatch.setattr(app, "send_task", to_the_doomed_worker)
    doomed = Worker(queue=queue, AGENTDESK_CRASH_AT=point).start()
    try:
        with tenancy.agency_context(agent.agency_id):
            approval = Approval.objects.get(execution=execution)
            approval_decide(approval=approval, approve=True, user_id=None, reason="Yes")
        assert doomed.wait_exit(60) == -9, doomed.output()[-2000:]
    finally:
        doomed.kill()
    monkeypatch.setattr(app, "send_task", send_task)

    # What beat does once the dead worker's lease runs out: the session's worker resumes it.
    time.sleep(LEASE_SECONDS + 0.5)
    assert reap_expired_leases() >= 1
    execution = wait_for(execution)
    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    with tenancy.agency_context(agent.agency_id):
        notes = Note.objects.filter(contact=contact).count()
        calls = list(ToolCall.objects.filter(execution=execution).values_list("status", flat=True))
        decided = Approval.objects.get(pk=approval.pk).status
    assert notes == 1  # the approved action applied exactly once
    assert calls == ["completed"]
    assert decided == ApprovalStatus.APPROVED
