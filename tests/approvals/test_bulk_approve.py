"""Approve selected (issue 27 item 15): two approvers approve overlapping selections of low-risk
actions at the same moment, through the inbox's page on the real ASGI server: each approval is
decided once (one resolved event, one decider), the second approver is told it was decided
already, and an action that is not low risk is never approved in bulk."""

from __future__ import annotations

import secrets
import string
import threading
import time
from typing import Any

import httpx
import pytest
from django.db import connection

from approvals.bulk import BulkOutcome, approval_bulk_approve
from approvals.models import Approval, ApprovalStatus, RiskLevel
from audit.models import AuditChain
from audit.services import audit_record
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


def test_a_bulk_approval_locks_every_item_before_its_first_audited_decision(
    live_db: Any,
) -> None:
    """A decision's audit entry locks the agency's audit chain until the batch commits: a batch
    that decided (and audited) its first item before taking the next one's locks held the chain
    while waiting for a second approver who held that item and waited for the chain (a
    deadlock, answered 503). Here the second item is held by another transaction: the batch
    waits for it with the chain still free."""
    agency = AgencyFactory.create()
    first, second = sorted(
        (waiting_approval(agency, risk=RiskLevel.LOW) for _ in range(2)),
        key=lambda a: (a.execution_id, a.pk),
    )
    approver = MembershipFactory.create(agency=agency, role=Role.APPROVER).user
    with tenancy.agency_context(agency.pk):
        audit_record(action="test.chain_opened", agency_id=agency.pk)  # the chain's row exists
    holding, release = threading.Event(), threading.Event()
    outcome: list[BulkOutcome] = []

    def hold_second() -> None:
        try:
            with tenancy.agency_context(agency.pk):
                Approval.objects.select_for_update().get(pk=second.pk)
                holding.set()
                release.wait(60)
        finally:
            connection.close()

    def approve_both() -> None:
        try:
            with tenancy.agency_context(agency.pk):
                outcome.append(
                    approval_bulk_approve(
                        agency_id=agency.pk, approval_ids=[first.pk, second.pk], user_id=approver.pk
                    )
                )
        finally:
            connection.close()

    holder = threading.Thread(target=hold_second)
    holder.start()
    assert holding.wait(30)
    batch = threading.Thread(target=approve_both)
    batch.start()
    try:
        waiting_on_locks = 0
        for _ in range(300):  # until the batch waits for the held item
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT count(*) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND wait_event_type = 'Lock'"
                )
                (waiting_on_locks,) = cursor.fetchone()
            if waiting_on_locks:
                break
            time.sleep(0.05)
        assert waiting_on_locks == 1
        with tenancy.agency_context(agency.pk):  # raises LockNotAvailable if the batch holds it
            chain = AuditChain.objects.select_for_update(nowait=True).get(agency_id=agency.pk)
        assert chain.head_seq >= 1
    finally:
        release.set()
        holder.join(60)
        batch.join(60)
    assert [a.pk for a in outcome[0].approved] == [first.pk, second.pk]
