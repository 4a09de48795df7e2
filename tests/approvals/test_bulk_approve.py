"""Approve selected (issue 27 item 15): two approvers approve overlapping selections of low-risk
actions at the same moment, through the inbox's page on the real ASGI server: each approval is
decided once (one resolved event, one decider), the second approver is told it was decided
already, and an action that is not low risk is never approved in bulk."""

from __future__ import annotations

import secrets
import string
import threading
from typing import Any

import httpx
import pytest

from approvals.models import Approval, ApprovalStatus, RiskLevel
from core import tenancy
from core.models import Event, Role
from tests.approvals.inbox_helpers import waiting_approval
from tests.factories import AgencyFactory, MembershipFactory
from tests.live.helpers import session_cookie
from tests.processes import AsgiServer

pytestmark = pytest.mark.slow
LOW = 16


def test_two_approvers_bulk_approving_overlapping_selections_decide_each_once(
    asgi_server: AsgiServer, live_db: Any
) -> None:
    agency = AgencyFactory.create()
    low = [waiting_approval(agency, risk=RiskLevel.LOW) for _ in range(LOW)]
    high = waiting_approval(agency, risk=RiskLevel.HIGH)
    first, second = (
        MembershipFactory.create(agency=agency, role=Role.APPROVER).user for _ in range(2)
    )
    # Overlapping in the middle, each in its own order: the server takes one order for both.
    picks = {
        first.pk: [*low[: LOW * 3 // 4], high],
        second.pk: list(reversed(low[LOW // 4 :])),
    }
    csrf = "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(32))
    start = threading.Barrier(2)
    answers: dict[int, httpx.Response] = {}

    def approve_selected(user_id: int, cookie: str) -> None:
        with httpx.Client(base_url=asgi_server.url, timeout=60) as client:
            start.wait()
            answers[user_id] = client.post(
                "/approvals/approve-selected/",
                data={"approval": [str(a.pk) for a in picks[user_id]]},
                headers={"Cookie": f"{cookie}; csrftoken={csrf}", "X-CSRFToken": csrf},
            )

    threads = [
        threading.Thread(target=approve_selected, args=(user.pk, session_cookie(user)))
        for user in (first, second)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(90)

    assert {user_id: r.status_code for user_id, r in answers.items()} == {
        first.pk: 302,
        second.pk: 302,
    }
    with tenancy.agency_context(agency.pk):
        decided = {a.pk: a for a in Approval.objects.filter(pk__in=[a.pk for a in low])}
        resolved = list(
            Event.objects.filter(
                event_type="ai.approval.resolved",
                source_entity_id__in=[str(a.pk) for a in [*low, high]],
            ).values_list("source_entity_id", flat=True)
        )
        high_now = Approval.objects.get(pk=high.pk)
    assert sorted(resolved) == sorted(str(a.pk) for a in low)  # each once, the high one never
    assert {a.status for a in decided.values()} == {ApprovalStatus.APPROVED}
    only_first = {a.pk for a in low[: LOW // 4]}
    only_second = {a.pk for a in low[LOW * 3 // 4 :]}
    for pk, approval in decided.items():
        expected = {first.pk} if pk in only_first else {second.pk} if pk in only_second else None
        assert approval.decided_by_id in (expected or {first.pk, second.pk})
    assert high_now.status == ApprovalStatus.PENDING
