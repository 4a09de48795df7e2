"""The ``ask_user`` tool end to end: the run waits for a person's answer holding no worker, the
answer resumes it as the call's result, and a person may stop the run instead. A real Celery
worker, PostgreSQL and Redis, and the fake provider server."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from agents.models import Agent, Execution, ExecutionStatus, StopReason
from agents.services import execution_create
from approvals.models import Approval, Question, QuestionKind, QuestionStatus
from approvals.questions import question_answer
from approvals.services import approval_decide
from core import tenancy
from core.exceptions import ApplicationError
from core.models import ActorType, Event
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import by_turn, text_reply, tool_call_reply
from tests.factories import UserFactory
from tests.processes import TERMINAL, Worker, wait_for
from tools.models import ToolCall, ToolCallStatus

pytestmark = pytest.mark.slow
QUESTION = "Which plan should the offer be for?"
ASK = {
    "question": QUESTION,
    "options": ["Basic", "Pro"],
    "allow_other": False,
    "question_type": "choice",
}


def _asking_agent(make_agent: Callable[..., Agent], server: FakeProviderServer) -> Agent:
    agent = make_agent("openai", allowed_tools=["ask_user"])
    server.set_responder(
        by_turn(tool_call_reply("ask_user", ASK), text_reply("The Pro offer it is.")),
        key=agent.llm_model,
    )
    return agent


def _waiting_run(agent: Agent) -> Execution:
    with tenancy.agency_context(agent.agency_id):
        execution = execution_create(agent=agent, input="Prepare the renewal offer.")
    assert execution is not None
    return wait_for(execution, {"waiting_input", "waiting_approval"})


def _question(execution: Execution) -> Question:
    with tenancy.agency_context(execution.agency_id):
        return Question.objects.get(execution=execution)


def _call(execution: Execution) -> ToolCall:
    with tenancy.agency_context(execution.agency_id):
        return ToolCall.objects.get(execution=execution)


def test_ask_user_parks_the_run_until_an_answer_which_becomes_the_calls_result(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = _asking_agent(make_agent, fake_llm_server)
    answerer = UserFactory.create()

    execution = _waiting_run(agent)

    assert execution.status == ExecutionStatus.WAITING_INPUT
    assert execution.lease_owner == ""  # no worker holds it
    question = _question(execution)
    call = _call(execution)
    assert question.status == QuestionStatus.PENDING
    assert question.kind == QuestionKind.QUESTION
    assert question.question == QUESTION
    assert question.options == ["Basic", "Pro"]
    assert question.allow_other is False
    assert question.tool_call_id == call.id
    assert execution.input_request["question_id"] == str(question.id)
    assert execution.input_request["options"] == ["Basic", "Pro"]
    assert (call.tool_name, call.status) == ("ask_user", ToolCallStatus.WAITING_INPUT)
    assert len(fake_llm_server.requests_for(agent.llm_model)) == 1

    with tenancy.agency_context(agent.agency_id):
        question_answer(question=question, answer="Pro", user_id=answerer.id)
        with pytest.raises(ApplicationError) as second:
            question_answer(question=question, answer="Basic", user_id=answerer.id)
    assert second.value.status == 409
    assert second.value.code == "already_answered"

    execution = wait_for(execution)
    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    assert execution.output == "The Pro offer it is."
    question = _question(execution)
    assert question.status == QuestionStatus.ANSWERED
    assert question.user_response == "Pro"
    assert question.responded_by_id == answerer.id
    assert question.response_timestamp is not None
    call = _call(execution)
    assert call.status == ToolCallStatus.COMPLETED
    assert call.output == {"answer": "Pro"}
    requests = fake_llm_server.requests_for(agent.llm_model)
    assert len(requests) == 2
    # The model's next request carries the answer as the ask_user call's result.
    assert [json.loads(result) for result in requests[1].tool_results] == [{"answer": "Pro"}]


def test_an_answer_outside_closed_options_is_refused_and_changes_nothing(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = _asking_agent(make_agent, fake_llm_server)
    execution = _waiting_run(agent)
    question = _question(execution)

    with tenancy.agency_context(agent.agency_id), pytest.raises(ApplicationError) as refused:
        question_answer(question=question, answer="Enterprise", user_id=None)

    assert refused.value.code == "invalid_answer"
    assert refused.value.status == 400
    question = _question(execution)
    assert question.status == QuestionStatus.PENDING
    assert question.user_response == ""
    assert question.response_timestamp is None
    with tenancy.agency_context(agent.agency_id):
        execution.refresh_from_db()
    assert execution.status == ExecutionStatus.WAITING_INPUT
    assert _call(execution).status == ToolCallStatus.WAITING_INPUT
    assert len(fake_llm_server.requests_for(agent.llm_model)) == 1


def test_stop_instead_of_an_answer_cancels_the_run_and_its_call(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = _asking_agent(make_agent, fake_llm_server)
    stopper = UserFactory.create()
    execution = _waiting_run(agent)

    with tenancy.agency_context(agent.agency_id):
        question_answer(question=_question(execution), answer="", user_id=stopper.id, stop=True)
        execution.refresh_from_db()

    assert execution.status == ExecutionStatus.CANCELLED
    assert execution.stop_reason == StopReason.CANCELLED
    assert QUESTION in execution.error
    question = _question(execution)
    assert question.status == QuestionStatus.SKIPPED
    assert question.responded_by_id == stopper.id
    call = _call(execution)
    assert (call.status, call.error_code) == (ToolCallStatus.CANCELLED, "question_stopped")
    assert len(fake_llm_server.requests_for(agent.llm_model)) == 1  # never resumed


def test_asking_and_answering_emit_ai_question_events(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = _asking_agent(make_agent, fake_llm_server)
    answerer = UserFactory.create()
    execution = _waiting_run(agent)
    question = _question(execution)
    with tenancy.agency_context(agent.agency_id):
        question_answer(question=question, answer="Basic", user_id=answerer.id)
    wait_for(execution)

    with tenancy.agency_context(agent.agency_id):
        events = {
            event.event_type: event
            for event in Event.objects.filter(
                source_entity_type="question", source_entity_id=str(question.id)
            )
        }
    assert set(events) == {"ai.question.asked", "ai.question.answered"}
    asked, answered = events["ai.question.asked"], events["ai.question.answered"]
    assert (asked.actor_type, asked.actor_id) == (ActorType.AGENT, str(agent.id))
    assert asked.payload["execution_id"] == str(execution.id)
    assert asked.payload["kind"] == QuestionKind.QUESTION
    assert (answered.actor_type, answered.actor_user_id) == (ActorType.USER, answerer.id)
    assert answered.payload["status"] == QuestionStatus.ANSWERED
    assert answered.payload["answered_by"] == answerer.id


def test_an_ask_user_call_that_needed_approval_waits_for_the_answer_once_approved(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    # A cautious agent: every tool call needs a person's approval first, ask_user included.
    # (Fails today: tools/executor.py `_park_for_answer` inserts a second ToolCall row with the
    # approved call's idempotency key, and the run ends failed on the unique constraint.)
    agent = make_agent(
        "openai",
        allowed_tools=["ask_user"],
        constraints=[{"type": "require_approval", "tools": ["*"]}],
    )
    fake_llm_server.set_responder(
        by_turn(tool_call_reply("ask_user", ASK), text_reply("The Pro offer it is.")),
        key=agent.llm_model,
    )
    execution = _waiting_run(agent)
    assert execution.status == ExecutionStatus.WAITING_APPROVAL
    with tenancy.agency_context(agent.agency_id):
        approval_decide(
            approval=Approval.objects.get(execution=execution), approve=True, user_id=None
        )

    execution = wait_for(execution, {"waiting_input", *TERMINAL})

    assert execution.status == ExecutionStatus.WAITING_INPUT, execution.error
    question = _question(execution)
    assert question.tool_call_id == _call(execution).id
    with tenancy.agency_context(agent.agency_id):
        question_answer(question=question, answer="Pro", user_id=None)
    execution = wait_for(execution)
    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    requests = fake_llm_server.requests_for(agent.llm_model)
    assert [json.loads(result) for result in requests[-1].tool_results] == [{"answer": "Pro"}]
