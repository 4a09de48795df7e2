"""Self-correction (seed 000: "max 3 attempts then human"): a run whose model keeps failing the
same tool waits for a person, who gives a hint (the run resumes with it) or stops it; a run that
answers right after failed calls says so in its result. A real Celery worker, PostgreSQL and
Redis, and the fake provider server."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from agents.models import Agent, Execution, ExecutionStatus, StopReason
from agents.services import execution_create
from approvals.models import Question, QuestionKind, QuestionStatus
from approvals.questions import question_answer
from core import tenancy
from crm.models import Contact, Note
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import Reply, by_turn, text_reply, tool_call_reply
from tests.factories import UserFactory
from tests.processes import Worker, wait_for
from tools.models import ToolCall, ToolCallStatus

pytestmark = pytest.mark.slow
HINT = "Search the contact by e-mail first: the id you use does not exist."
MISSING_CONTACT = str(uuid.uuid4())  # no contact has this id: the handler's ToolError not_found


def _note_call(contact_id: str, content: str = "Renewal agreed.") -> Reply:
    return tool_call_reply("crm_add_note", {"contact_id": contact_id, "content": content})


def _start(agent: Agent) -> Execution:
    with tenancy.agency_context(agent.agency_id):
        execution = execution_create(agent=agent, input="Note the renewal on Ada's contact.")
    assert execution is not None
    return execution


def _contact(agent: Agent) -> Contact:
    with tenancy.agency_context(agent.agency_id):
        return Contact.objects.create(
            agency_id=agent.agency_id, first_name="Ada", email="ada@example.com"
        )


def _calls(execution: Execution) -> list[tuple[str, str]]:
    with tenancy.agency_context(execution.agency_id):
        return list(
            ToolCall.objects.filter(execution=execution)
            .order_by("created_at")
            .values_list("status", "error_code")
        )


def _questions(execution: Execution) -> list[Question]:
    with tenancy.agency_context(execution.agency_id):
        return list(Question.objects.filter(execution=execution))


def _notes(agent: Agent) -> list[tuple[uuid.UUID, str]]:
    with tenancy.agency_context(agent.agency_id):
        return list(
            Note.objects.filter(agency_id=agent.agency_id).values_list("contact_id", "content")
        )


@pytest.fixture
def failing_thrice(
    make_agent: Callable[..., Agent], fake_llm_server: FakeProviderServer
) -> tuple[Agent, Contact]:
    """An agent whose model calls crm_add_note on a missing contact three times, then (once a
    person has helped) on the right one, then answers."""
    agent = make_agent("openai", allowed_tools=["crm_*"])
    contact = _contact(agent)
    fake_llm_server.set_responder(
        by_turn(
            _note_call(MISSING_CONTACT),
            _note_call(MISSING_CONTACT),
            _note_call(MISSING_CONTACT),
            _note_call(str(contact.id)),
            text_reply("Noted."),
        ),
        key=agent.llm_model,
    )
    return agent, contact


def test_a_tool_failing_three_times_pauses_the_run_and_a_hint_resumes_it(
    failing_thrice: tuple[Agent, Contact],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent, contact = failing_thrice
    helper = UserFactory.create()

    execution = wait_for(_start(agent), {"waiting_input", "waiting_approval"})

    assert execution.status == ExecutionStatus.WAITING_INPUT
    assert execution.lease_owner == ""
    [question] = _questions(execution)
    assert question.kind == QuestionKind.CORRECTION
    assert question.status == QuestionStatus.PENDING
    assert question.tool_call_id is None
    assert question.options == ["retry", "stop"]
    assert question.context["tool"] == "crm_add_note"
    failures: list[dict[str, Any]] = question.context["failures"]
    assert [f["error_code"] for f in failures] == ["not_found"] * 3
    assert all(f["arguments"]["contact_id"] == MISSING_CONTACT for f in failures)
    assert all(MISSING_CONTACT in f["error"] for f in failures)
    assert execution.input_request["question_id"] == str(question.id)
    assert execution.input_request["correction"] is True
    assert _calls(execution) == [(ToolCallStatus.FAILED, "not_found")] * 3
    assert len(fake_llm_server.requests_for(agent.llm_model)) == 3  # no fourth attempt

    with tenancy.agency_context(agent.agency_id):
        question_answer(question=question, answer=HINT, user_id=helper.id)
    execution = wait_for(execution)

    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    requests = fake_llm_server.requests_for(agent.llm_model)
    assert len(requests) == 5
    assert HINT in requests[3].last_user_text  # the hint is what the model saw next
    assert _calls(execution) == [(ToolCallStatus.FAILED, "not_found")] * 3 + [
        (ToolCallStatus.COMPLETED, "")
    ]
    assert _notes(agent) == [(contact.id, "Renewal agreed.")]  # the contact the hint led to
    [question] = _questions(execution)
    assert (question.status, question.responded_by_id) == (QuestionStatus.ANSWERED, helper.id)
    assert "last_tool_calls_failed" not in (execution.result or {})  # its last call succeeded


def test_stop_after_repeated_failures_fails_the_run_with_tool_failures(
    failing_thrice: tuple[Agent, Contact],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent, _ = failing_thrice
    execution = wait_for(_start(agent), {"waiting_input", "waiting_approval"})
    [question] = _questions(execution)

    with tenancy.agency_context(agent.agency_id):
        question_answer(question=question, answer="", user_id=None, stop=True)
        execution.refresh_from_db()

    assert execution.status == ExecutionStatus.FAILED
    assert execution.stop_reason == StopReason.TOOL_FAILURES
    assert "crm_add_note failed 3 times" in execution.error
    [question] = _questions(execution)
    assert question.status == QuestionStatus.SKIPPED
    assert len(fake_llm_server.requests_for(agent.llm_model)) == 3  # never resumed
    assert _notes(agent) == []


def test_with_max_corrections_zero_the_run_never_pauses_and_is_marked_failed_calls(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    # (loop_threshold 0: the same failing call four times would otherwise be a loop, which
    # tests/flow/test_loops.py covers)
    agent = make_agent("openai", allowed_tools=["crm_*"], max_corrections=0, loop_threshold=0)
    # Invalid arguments this time (no content): refused by the schema check, four times.
    invalid = tool_call_reply("crm_add_note", {"contact_id": MISSING_CONTACT})
    fake_llm_server.set_responder(
        by_turn(invalid, invalid, invalid, invalid, text_reply("I could not add the note.")),
        key=agent.llm_model,
    )

    execution = wait_for(_start(agent))

    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    assert _questions(execution) == []
    assert _calls(execution) == [(ToolCallStatus.FAILED, "invalid_arguments")] * 4
    failed = execution.result["last_tool_calls_failed"]
    assert [(f["tool"], f["code"]) for f in failed] == [("crm_add_note", "invalid_arguments")]
    with tenancy.agency_context(agent.agency_id):
        assert not execution.state_transitions.filter(to_state="waiting_input").exists()


def test_a_final_answer_right_after_failed_calls_is_marked_in_the_result(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = make_agent("anthropic", allowed_tools=["crm_*"])  # default max_corrections: 3
    fake_llm_server.set_responder(
        by_turn(
            _note_call(MISSING_CONTACT),
            _note_call(MISSING_CONTACT),
            text_reply("Done."),  # two failures, below the limit: no pause
        ),
        key=agent.llm_model,
    )

    execution = wait_for(_start(agent))

    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    assert execution.stop_reason == StopReason.FINAL_ANSWER
    assert _questions(execution) == []
    failed = execution.result["last_tool_calls_failed"]
    assert [(f["tool"], f["code"]) for f in failed] == [("crm_add_note", "not_found")]
    assert MISSING_CONTACT in failed[0]["message"]


def test_answering_a_correction_with_its_stop_option_stops_the_run(
    failing_thrice: tuple[Agent, Contact],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    # The correction offers the answers ["retry", "stop"] (the API lists them, the deciders'
    # e-mail says "Options: retry, stop"). Picking "stop" must stop the run, not resume it with
    # "stop" as a hint. (Fails today: approvals/questions.py `question_answer` maps only
    # stop=True to stopping; the run resumes and the model writes the note after all.)
    agent, _ = failing_thrice
    execution = wait_for(_start(agent), {"waiting_input", "waiting_approval"})
    [question] = _questions(execution)
    assert "stop" in question.options

    with tenancy.agency_context(agent.agency_id):
        question_answer(question=question, answer="stop", user_id=None)
    execution = wait_for(execution)

    assert (execution.status, execution.stop_reason) == (
        ExecutionStatus.FAILED,
        StopReason.TOOL_FAILURES,
    )
    assert len(fake_llm_server.requests_for(agent.llm_model)) == 3
    assert _notes(agent) == []
