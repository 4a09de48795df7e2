"""Approvals over REST: the queue (filter by status) and the decision, by approvers only."""

from __future__ import annotations

import pytest

from agents.models import Agent, Execution, ExecutionStatus
from approvals.models import Approval, ApprovalStatus
from core import tenancy
from core.models import Role
from tests.api.conftest import count, fields_of
from tests.approvals.factories import ApprovalFactory

URL = "/api/v1/approvals/"


@pytest.fixture
def approval(tenant_a):
    approval = ApprovalFactory.create(
        tool_call__execution__agent__agency=tenant_a.agency,
        tool_call__execution__agent__site=tenant_a.site,
        tool_call__execution__status=ExecutionStatus.WAITING_APPROVAL,
    )
    assert approval.agency_id == tenant_a.agency.id
    return approval


def _status(approval: Approval) -> str:
    from core import tenancy

    with tenancy.platform_context():
        return Approval.objects.get(pk=approval.pk).status


def test_list_pending_approvals(approval, as_role) -> None:
    client = as_role(Role.VIEWER)
    assert [a["id"] for a in client.get(URL, {"status": "pending"}).json()["results"]] == [
        str(approval.id)
    ]
    assert client.get(URL, {"status": "approved"}).json()["count"] == 0
    assert client.get(f"{URL}{approval.id}/").json()["action_type"] == approval.action_type
    assert "status" in fields_of(client.get(URL, {"status": "maybe"}))


@pytest.mark.parametrize("role", [Role.APPROVER, Role.ADMIN])
def test_approve_resumes_the_run(approval, as_role, role) -> None:
    response = as_role(role).post(
        f"{URL}{approval.id}/decide/",
        {"decision": "approve", "reason": "Looks right"},
        format="json",
    )
    assert response.status_code == 200, response.json()
    assert response.json()["status"] == ApprovalStatus.APPROVED
    assert response.json()["decision_reason"] == "Looks right"
    assert count(Execution, pk=approval.execution_id, status=ExecutionStatus.PENDING) == 1


def test_deny_cancels_the_run_and_a_second_decision_is_409(approval, as_role) -> None:
    client = as_role(Role.APPROVER)
    url = f"{URL}{approval.id}/decide/"
    assert client.post(url, {"decision": "deny", "reason": "No"}, format="json").status_code == 200
    assert count(Execution, pk=approval.execution_id, status=ExecutionStatus.CANCELLED) == 1
    again = client.post(url, {"decision": "approve"}, format="json")
    assert again.status_code == 409
    assert again.json()["code"] == "already_decided"
    assert _status(approval) == ApprovalStatus.DENIED


def test_approve_with_edited_arguments_checked_against_the_tool_schema(approval, as_role) -> None:
    client = as_role(Role.APPROVER)
    url = f"{URL}{approval.id}/decide/"
    bad = client.post(url, {"decision": "approve", "edited_arguments": {"q": 5}}, format="json")
    assert bad.json()["code"] == "invalid_arguments"
    assert fields_of(bad)["edited_arguments"] == ["$.q: 5 is not of type 'string'"]
    assert _status(approval) == ApprovalStatus.PENDING
    good = client.post(
        url, {"decision": "approve", "edited_arguments": {"q": "edited"}}, format="json"
    )
    assert good.json()["edited_arguments"] == {"q": "edited"}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"decision": "maybe"}, "decision"),
        ({}, "decision"),
        ({"decision": "approve", "approved": True}, "approved"),
        ({"decision": "deny", "edited_arguments": {"q": "x"}}, "edited_arguments"),
        ({"decision": "approve", "edited_arguments": ["x"]}, "edited_arguments"),
        ({"decision": "deny", "reason": "x" * 2001}, "reason"),
    ],
)
def test_bad_decisions_are_400_and_change_nothing(approval, as_role, body, field) -> None:
    response = as_role(Role.APPROVER).post(f"{URL}{approval.id}/decide/", body, format="json")
    assert field in fields_of(response)
    assert _status(approval) == ApprovalStatus.PENDING


@pytest.mark.parametrize("role", [Role.STAFF, Role.VIEWER])
def test_only_approvers_and_admins_decide(approval, as_role, role) -> None:
    response = as_role(role).post(
        f"{URL}{approval.id}/decide/", {"decision": "approve"}, format="json"
    )
    assert response.status_code == 403
    assert _status(approval) == ApprovalStatus.PENDING


def test_another_agencys_approval_is_a_404(tenant_b, as_role) -> None:
    theirs = ApprovalFactory.create(
        tool_call__execution__agent__agency=tenant_b.agency,
        tool_call__execution__agent__site=tenant_b.site,
    )
    client = as_role(Role.ADMIN)
    assert client.get(URL).json()["count"] == 0
    assert client.get(f"{URL}{theirs.id}/").status_code == 404
    decide = client.post(f"{URL}{theirs.id}/decide/", {"decision": "approve"}, format="json")
    assert decide.status_code == 404
    assert _status(theirs) == ApprovalStatus.PENDING


def test_a_deny_needs_a_reason_and_continuing_needs_the_agents_consent(approval, as_role) -> None:
    client = as_role(Role.APPROVER)
    url = f"{URL}{approval.id}/decide/"
    assert "reason" in fields_of(client.post(url, {"decision": "deny"}, format="json"))
    assert "continue_run" in fields_of(
        client.post(url, {"decision": "approve", "continue_run": True}, format="json")
    )
    refused = client.post(
        url, {"decision": "deny", "reason": "Not now", "continue_run": True}, format="json"
    )
    assert refused.status_code == 400
    assert refused.json()["code"] == "continue_not_allowed"
    assert _status(approval) == ApprovalStatus.PENDING
    with tenancy.platform_context():
        Agent.objects.filter(pk=approval.agent_id).update(deny_may_continue=True)
    allowed = client.post(
        url, {"decision": "deny", "reason": "Not now", "continue_run": True}, format="json"
    )
    assert allowed.status_code == 200, allowed.json()
    # The run goes on (a worker resumes it and tells the model no), not cancelled.
    assert count(Execution, pk=approval.execution_id, status=ExecutionStatus.PENDING) == 1
