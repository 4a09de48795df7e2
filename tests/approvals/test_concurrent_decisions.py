"""Thirty approvers' clicks at once on one approval, through the inbox page and the REST API
together, against the real ASGI server: one decision wins, every other is a 409, and the approved
action runs once (counted in the CRM's notes, the tool's side effect)."""

from __future__ import annotations

import functools
import secrets
import string
import threading
from collections.abc import Callable

import httpx
import pytest

from agents.models import Agent, ExecutionStatus
from agents.services import execution_create
from approvals.models import Approval, ApprovalStatus
from core import tenancy
from core.models import Role
from crm.models import Contact, Note
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import by_turn, text_reply, tool_call_reply
from tests.api.conftest import new_key
from tests.factories import MembershipFactory
from tests.live.helpers import session_cookie
from tests.processes import AsgiServer, Worker, wait_for
from tools.models import ToolCall

pytestmark = pytest.mark.slow
CLICKS = 30  # half through the page, half through the API
APPROVE_NOTES = {"type": "require_approval", "tools": ["crm_add_note"]}


def test_thirty_concurrent_decisions_give_one_and_the_action_runs_once(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
    asgi_server: AsgiServer,
) -> None:
    agent = make_agent(allowed_tools=["crm_*"], constraints=[APPROVE_NOTES])
    with tenancy.agency_context(agent.agency_id):
        contact = Contact.objects.create(agency_id=agent.agency_id, first_name="Lin")
    fake_llm_server.set_responder(
        by_turn(
            tool_call_reply("crm_add_note", {"contact_id": str(contact.id), "content": "Call."}),
            text_reply("Noted."),
        ),
        key=agent.llm_model,
    )
    with tenancy.agency_context(agent.agency_id):
        execution = execution_create(agent=agent, input="Note the call.")
    assert execution is not None
    execution = wait_for(execution, {"waiting_approval"})
    with tenancy.agency_context(agent.agency_id):
        approval = Approval.objects.get(execution=execution)

    approvers = [
        MembershipFactory.create(agency=agent.agency, role=Role.APPROVER).user for _ in range(3)
    ]
    api_key = new_key(agent.agency, Role.APPROVER)
    # Django's CSRF check compares the form's token (here the header) with the cookie's secret.
    csrf = "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(32))

    def on_the_page(cookie: str, client: httpx.Client) -> httpx.Response:
        return client.post(
            f"/approvals/{approval.id}/approve/",
            headers={"Cookie": f"{cookie}; csrftoken={csrf}", "X-CSRFToken": csrf},
        )

    def over_the_api(client: httpx.Client) -> httpx.Response:
        return client.post(
            f"/api/v1/approvals/{approval.id}/decide/",
            json={"decision": "approve", "reason": "ok"},
            headers={"Authorization": f"Bearer {api_key}"},
        )

    requests: list[Callable[[httpx.Client], httpx.Response]] = [
        functools.partial(on_the_page, session_cookie(approvers[n % 3])) if n % 2 else over_the_api
        for n in range(CLICKS)
    ]
    start = threading.Barrier(CLICKS)
    codes: list[int] = []
    lock = threading.Lock()

    def click(send: Callable[[httpx.Client], httpx.Response]) -> None:
        with httpx.Client(base_url=asgi_server.url, timeout=30) as client:
            start.wait()
            code = send(client).status_code
        with lock:
            codes.append(code)

    threads = [threading.Thread(target=click, args=(send,)) for send in requests]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    assert len(codes) == CLICKS
    winners = [code for code in codes if code in (200, 302)]  # API 200, page redirect
    assert len(winners) == 1, sorted(codes)
    assert sorted(codes).count(409) == CLICKS - 1, sorted(codes)
    execution = wait_for(execution)
    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    with tenancy.agency_context(agent.agency_id):
        assert Note.objects.filter(contact=contact).count() == 1  # ran once
        assert list(
            ToolCall.objects.filter(execution=execution).values_list("status", flat=True)
        ) == ["completed"]
        assert Approval.objects.get(pk=approval.pk).status == ApprovalStatus.APPROVED
