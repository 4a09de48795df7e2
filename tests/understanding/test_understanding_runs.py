"""The understanding phase through a real Celery worker, with the demo model (devkit's scripted
provider) on the fake provider server: an agent with it on states its understanding before it
acts; a clear request goes on, an ambiguous one asks a person in the questions inbox, and the
answer (over the API) resumes the run from understanding. Off by default: no extra call."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agents.models import Agent, DecisionPoint, Execution, ExecutionStatus, StepType
from agents.services import execution_create
from approvals.models import Question, QuestionKind, QuestionStatus
from core import tenancy
from core.models import Role
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.demo import demo_responder
from devkit.fake_server.demo.understanding import understand
from devkit.fake_server.script import by_turn, text_reply, tool_call_reply
from tests.api.conftest import key_client
from tests.processes import Worker, wait_for
from understanding.reading import OPENING

pytestmark = pytest.mark.slow
AMBIGUOUS = "Who are our best customers?"
CLEAR = "How many contacts were created this week?"


@pytest.fixture
def analyst(
    make_agent: Callable[..., Agent], fake_llm_server: FakeProviderServer
) -> Callable[..., Agent]:
    def make(**fields: object) -> Agent:
        agent = make_agent("openai", allowed_tools=[], **fields)
        fake_llm_server.set_responder(
            demo_responder(think_seconds=0, stream_interval=0), key=agent.llm_model
        )
        return agent

    return make


def _start(agent: Agent, text: str) -> Execution:
    with tenancy.agency_context(agent.agency_id):
        execution = execution_create(agent=agent, input=text)
    assert execution is not None
    return execution


def _understandings(execution: Execution) -> list[dict[str, Any]]:
    with tenancy.agency_context(execution.agency_id):
        steps = execution.steps.filter(step_type=StepType.REFLECT).order_by("step_number")
        return [(step.llm_response or {})["understanding"] for step in steps]


def _gate(execution: Execution) -> list[tuple[str, float | None]]:
    with tenancy.agency_context(execution.agency_id):
        points = DecisionPoint.objects.filter(execution=execution, decision_type="clarification")
        return [(p.chosen_option["choice"], p.confidence_score) for p in points]


def test_an_ambiguous_request_asks_in_the_inbox_and_the_answer_resumes_from_understanding(
    analyst: Callable[..., Agent], fake_llm_server: FakeProviderServer, celery_worker: Worker
) -> None:
    agent = analyst(understanding_enabled=True)

    execution = wait_for(_start(agent, AMBIGUOUS), {ExecutionStatus.WAITING_INPUT})

    with tenancy.agency_context(agent.agency_id):
        [question] = Question.objects.filter(execution=execution)
    assert (question.kind, question.status, question.tool_call_id) == (
        QuestionKind.QUESTION,
        QuestionStatus.PENDING,
        None,
    )
    assert question.question_type == "column_ambiguity"
    assert question.options == ["lead score", "deals won", "deal value"]
    assert execution.input_request["question_id"] == str(question.id)
    [understood] = _understandings(execution)
    assert understood["verdict"] == "ask"
    assert understood["confidence"] < understood["threshold"] == 0.7
    assert understood["ambiguities"][0]["entity"] == "best"
    assert _gate(execution) == [("ask", understood["confidence"])]
    # The understanding is a model call of the run (counted), and nothing acted yet.
    assert execution.llm_call_count == 1
    assert execution.tokens_total > 0
    [asked] = fake_llm_server.requests_for(agent.llm_model)
    assert (asked.system or "").startswith(OPENING)
    assert asked.tool_names == []

    response = key_client(agent.agency, Role.APPROVER).post(
        f"/api/v1/questions/{question.id}/answer/", {"answer": "lead score"}, format="json"
    )
    assert response.status_code == 200, response.content
    execution = wait_for(execution)

    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    again, acting = fake_llm_server.requests_for(agent.llm_model)[1:]
    assert (again.system or "").startswith(OPENING)  # understood again, with the answer
    assert "lead score" in again.last_user_text
    assert "lead score" in acting.last_user_text  # the agent acts knowing it
    assert [u["verdict"] for u in _understandings(execution)] == ["ask", "proceed"]
    assert [choice for choice, _ in _gate(execution)] == ["ask", "proceed"]
    assert execution.llm_call_count == 3


def test_a_clear_request_goes_on_without_a_question_and_is_no_step(
    make_agent: Callable[..., Agent], fake_llm_server: FakeProviderServer, celery_worker: Worker
) -> None:
    # Two steps allowed, a tool call and the answer: the understanding is a model call of the
    # run, not one of its steps.
    agent = make_agent(
        "openai", allowed_tools=["crm_*"], understanding_enabled=True, max_steps_per_run=2
    )
    acting = by_turn(
        tool_call_reply("crm_get_contact", {"email": "ada@example.com"}),
        text_reply("No contact was created this week."),
    )
    fake_llm_server.set_responder(
        lambda request: text_reply(reply) if (reply := understand(request)) else acting(request),
        key=agent.llm_model,
    )

    execution = wait_for(_start(agent, CLEAR))

    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    [understood] = _understandings(execution)
    assert understood["verdict"] == "proceed"
    assert understood["confidence"] >= 0.7
    assert [choice for choice, _ in _gate(execution)] == ["proceed"]
    with tenancy.agency_context(agent.agency_id):
        assert not Question.objects.filter(execution=execution).exists()
    assert len(fake_llm_server.requests_for(agent.llm_model)) == 3
    assert execution.llm_call_count == 3


def test_off_by_default_no_understanding_is_asked_for(
    analyst: Callable[..., Agent], fake_llm_server: FakeProviderServer, celery_worker: Worker
) -> None:
    agent = analyst()
    assert agent.understanding_enabled is False

    execution = wait_for(_start(agent, AMBIGUOUS))

    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    [request] = fake_llm_server.requests_for(agent.llm_model)
    assert not (request.system or "").startswith(OPENING)
    assert _understandings(execution) == []
    assert execution.llm_call_count == 1
