"""Questions over REST: what runs wait on, and the answer, by approvers and admins only."""

from __future__ import annotations

import pytest

from agents.models import Execution, ExecutionStatus, StepType
from approvals.models import Question, QuestionKind, QuestionStatus
from core import tenancy
from core.models import Role
from tests.agents.factories import ExecutionFactory
from tests.api.conftest import count, fields_of, token_client
from tests.approvals.factories import QuestionFactory

URL = "/api/v1/questions/"


@pytest.fixture
def question(tenant_a):
    return QuestionFactory.create(
        tool_call__execution__agent__agency=tenant_a.agency,
        tool_call__execution__agent__site=tenant_a.site,
        tool_call__execution__status=ExecutionStatus.WAITING_INPUT,
    )


def _question(question: Question) -> Question:
    with tenancy.platform_context():
        return Question.objects.get(pk=question.pk)


def test_list_and_read_pending_questions(question, as_role) -> None:
    client = as_role(Role.VIEWER)
    listed = client.get(URL, {"status": "pending"}).json()["results"]
    assert [q["id"] for q in listed] == [str(question.id)]
    assert listed[0]["options"] == ["Basic", "Pro"]
    assert client.get(URL, {"status": "answered"}).json()["count"] == 0
    assert client.get(f"{URL}{question.id}/").json()["question"] == question.question


def test_another_agency_neither_sees_nor_answers(question, tenant_b) -> None:
    client = token_client(tenant_b.users[Role.ADMIN])
    assert client.get(URL).json()["count"] == 0
    assert client.get(f"{URL}{question.id}/").status_code == 404
    answer = client.post(f"{URL}{question.id}/answer/", {"answer": "Pro"}, format="json")
    assert answer.status_code == 404
    assert _question(question).status == QuestionStatus.PENDING


@pytest.mark.parametrize("role", [Role.STAFF, Role.VIEWER])
def test_staff_and_viewers_cannot_answer(question, as_role, role) -> None:
    response = as_role(role).post(f"{URL}{question.id}/answer/", {"answer": "Pro"}, format="json")
    assert response.status_code == 403
    assert _question(question).status == QuestionStatus.PENDING


@pytest.mark.parametrize("role", [Role.APPROVER, Role.ADMIN])
def test_an_answer_resumes_the_run_and_a_second_is_409(question, as_role, role) -> None:
    client = as_role(role)
    url = f"{URL}{question.id}/answer/"
    response = client.post(url, {"answer": "Pro"}, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["status"] == QuestionStatus.ANSWERED
    assert response.json()["user_response"] == "Pro"
    assert count(Execution, pk=question.execution_id, status=ExecutionStatus.PENDING) == 1
    again = client.post(url, {"answer": "Basic"}, format="json")
    assert again.status_code == 409
    assert again.json()["code"] == "already_answered"
    assert _question(question).user_response == "Pro"


def test_an_empty_answer_or_one_outside_closed_options_is_refused(question, as_role) -> None:
    client = as_role(Role.APPROVER)
    url = f"{URL}{question.id}/answer/"
    assert "answer" in fields_of(client.post(url, {"answer": "  "}, format="json"))
    with tenancy.platform_context():
        Question.objects.filter(pk=question.pk).update(allow_other=False)
    refused = client.post(url, {"answer": "Enterprise"}, format="json")
    assert refused.status_code == 400
    assert refused.json()["code"] == "invalid_answer"
    assert _question(question).status == QuestionStatus.PENDING
    assert count(Execution, pk=question.execution_id, status=ExecutionStatus.WAITING_INPUT) == 1


def test_stop_ends_the_run_instead(question, as_role) -> None:
    response = as_role(Role.APPROVER).post(
        f"{URL}{question.id}/answer/", {"stop": True}, format="json"
    )
    assert response.status_code == 200, response.json()
    assert response.json()["status"] == QuestionStatus.SKIPPED
    assert count(Execution, pk=question.execution_id, status=ExecutionStatus.CANCELLED) == 1


def test_a_correction_hint_resumes_the_run_with_the_hint_to_observe(tenant_a, as_role) -> None:
    execution = ExecutionFactory.create(
        agent__agency=tenant_a.agency,
        agent__site=tenant_a.site,
        status=ExecutionStatus.WAITING_INPUT,
    )
    correction = QuestionFactory.create(
        tool_call=None,
        execution=execution,
        kind=QuestionKind.CORRECTION,
        options=["retry", "stop"],
        context={"tool": "crm_add_note", "failures": []},
    )
    hint = "Look the contact up by e-mail first."
    response = as_role(Role.APPROVER).post(
        f"{URL}{correction.id}/answer/", {"answer": hint}, format="json"
    )
    assert response.status_code == 200, response.json()
    with tenancy.platform_context():
        run = Execution.objects.get(pk=correction.execution_id)
        observed = list(
            run.steps.filter(step_type=StepType.OBSERVE).values_list("input_text", flat=True)
        )
    assert run.status == ExecutionStatus.PENDING
    assert any(hint in text for text in observed)
