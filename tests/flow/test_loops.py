"""Loop detection while a run goes: a model that repeats the same call is warned once (in the
result of the call that reaches the agent's loop threshold); the next identical call does not run
and the run stops with ``loop_detected`` and the evidence, or (``ask_human``) waits for a person
in the inbox, who lets it go on or stops it. A real Celery worker, PostgreSQL and Redis, and the
fake provider server."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from agents.models import (
    Agent,
    Execution,
    ExecutionStatus,
    ExecutionStep,
    LoopAction,
    StepType,
    StopReason,
)
from agents.services import execution_create
from approvals.models import Question, QuestionKind, QuestionStatus
from approvals.questions import question_answer
from core import tenancy
from core.models import Event
from crm.models import Contact
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import Reply, by_turn, text_reply, tool_call_reply
from flow.loops import LOOP_EVENT
from flow.models import LoopDetection, LoopKind, LoopOutcome
from tests.factories import UserFactory
from tests.processes import TERMINAL, Worker, wait_for
from tools.models import ToolCall

pytestmark = pytest.mark.slow
LOOKUP = {"email": "ada@example.com"}


def _lookup() -> Reply:
    return tool_call_reply("crm_get_contact", LOOKUP)


def _looping_agent(
    make_agent: Callable[..., Agent], server: FakeProviderServer, **fields: object
) -> Agent:
    """An agent whose model asks for the same contact six times, then answers."""
    agent = make_agent("openai", allowed_tools=["crm_*"], loop_threshold=3, **fields)
    with tenancy.agency_context(agent.agency_id):
        Contact.objects.create(agency_id=agent.agency_id, first_name="Ada", email=LOOKUP["email"])
    server.set_responder(
        by_turn(*[_lookup() for _ in range(6)], then=text_reply("Ada's contact is there.")),
        key=agent.llm_model,
    )
    return agent


def _start(agent: Agent) -> Execution:
    with tenancy.agency_context(agent.agency_id):
        execution = execution_create(agent=agent, input="Find Ada's contact.")
    assert execution is not None
    return execution


def _tool_calls(execution: Execution) -> int:
    with tenancy.agency_context(execution.agency_id):
        return ToolCall.objects.filter(execution=execution).count()


def _warned_results(execution: Execution) -> list[int]:
    """The act steps (by position) whose result carried the loop warning."""
    with tenancy.agency_context(execution.agency_id):
        outputs = ExecutionStep.objects.filter(
            execution=execution, step_type=StepType.ACT
        ).order_by("step_number")
        return [
            i
            for i, step in enumerate(outputs, start=1)
            if "loop_warning" in (step.tool_output or {})
        ]


def _detections(execution: Execution) -> list[str]:
    with tenancy.agency_context(execution.agency_id):
        return list(
            LoopDetection.objects.filter(execution=execution)
            .order_by("detected_at")
            .values_list("outcome", flat=True)
        )


def test_a_model_repeating_a_call_is_warned_once_then_the_run_stops_with_loop_detected(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = _looping_agent(make_agent, fake_llm_server)

    execution = wait_for(_start(agent))

    assert execution.status == ExecutionStatus.FAILED
    assert execution.stop_reason == StopReason.LOOP_DETECTED
    assert "crm_get_contact was called 4 times" in execution.error
    assert execution.error_details is not None
    loop = execution.error_details["loop"]
    assert loop["tool"] == "crm_get_contact"
    assert loop["arguments"] == LOOKUP
    assert loop["occurrences"] == 4
    assert loop["threshold"] == 3
    assert _tool_calls(execution) == 3  # the fourth identical call never ran
    assert _warned_results(execution) == [3]  # warned once, at the threshold
    requests = fake_llm_server.requests_for(agent.llm_model)
    assert len(requests) == 4
    warned = [r for r in requests[-1].tool_results if "Loop warning" in r]
    assert len(warned) == 1  # what the model saw before its fourth call
    assert "Do not call it again" in json.loads(warned[0])["loop_warning"]
    assert _detections(execution) == [LoopOutcome.WARNED, LoopOutcome.STOPPED]
    with tenancy.agency_context(agent.agency_id):
        [event] = Event.objects.filter(event_type=LOOP_EVENT)
    assert event.payload["execution_id"] == str(execution.id)
    assert event.payload["outcome"] == LoopOutcome.STOPPED
    assert event.payload["occurrences"] == 4


def test_a_loop_with_ask_human_waits_in_the_inbox_and_stop_ends_it_with_loop_detected(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = _looping_agent(make_agent, fake_llm_server, loop_action=LoopAction.ASK_HUMAN)
    person = UserFactory.create()

    execution = wait_for(_start(agent), {"waiting_input", *TERMINAL})

    assert execution.status == ExecutionStatus.WAITING_INPUT
    with tenancy.agency_context(agent.agency_id):
        [question] = Question.objects.filter(execution=execution)
    assert question.kind == QuestionKind.CORRECTION
    assert question.status == QuestionStatus.PENDING
    assert question.question_type == "loop"
    assert question.options == ["continue", "stop"]
    assert "crm_get_contact was called 4 times" in question.question
    assert execution.input_request["question_id"] == str(question.id)
    assert _tool_calls(execution) == 3
    assert _detections(execution) == [LoopOutcome.WARNED, LoopOutcome.ASKED]

    with tenancy.agency_context(agent.agency_id):
        question_answer(question=question, answer="stop", user_id=person.id)
        execution.refresh_from_db()

    assert execution.status == ExecutionStatus.FAILED
    assert execution.stop_reason == StopReason.LOOP_DETECTED
    assert "after a loop: crm_get_contact called 4 times" in execution.error
    assert _tool_calls(execution) == 3


def test_a_person_letting_the_loop_go_on_runs_the_call_and_the_count_starts_again(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = _looping_agent(make_agent, fake_llm_server, loop_action=LoopAction.ASK_HUMAN)
    person = UserFactory.create()
    execution = wait_for(_start(agent), {"waiting_input"})
    with tenancy.agency_context(agent.agency_id):
        [question] = Question.objects.filter(execution=execution)
        question_answer(question=question, answer="continue", user_id=person.id)

    execution = wait_for(execution)

    # Calls 4-6 run (the count starts again at 4: 5 and 6 stay under 4 + 3), then the answer.
    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    assert _tool_calls(execution) == 6
    requests = fake_llm_server.requests_for(agent.llm_model)
    assert "repeated calls of crm_get_contact" in requests[4].last_user_text


# --- the same state: the same result, whatever the arguments -----------------------------------

# Searches worded differently that all find Ada, and only her: the same result each time.
ADA_QUERIES = ["Ada", "ada", "ADA", "aDa", "Ada example", "ada@example.com", "example.com", "@ex"]


def _rewording_agent(
    make_agent: Callable[..., Agent],
    server: FakeProviderServer,
    *,
    ada_exists: bool = False,
    **fields: object,
) -> Agent:
    """An agent whose model searches for Ada eight ways (never the same arguments), then
    answers; the agency has no Ada (every search finds nothing) unless ``ada_exists``."""
    fields.setdefault("loop_same_state", True)
    agent = make_agent("openai", allowed_tools=["crm_*"], loop_threshold=3, **fields)
    if ada_exists:
        with tenancy.agency_context(agent.agency_id):
            Contact.objects.create(
                agency_id=agent.agency_id, first_name="Ada", email=LOOKUP["email"]
            )
    searches = [tool_call_reply("crm_search_contacts", {"query": q}) for q in ADA_QUERIES]
    server.set_responder(
        by_turn(*searches, then=text_reply("Ada is the only match.")), key=agent.llm_model
    )
    return agent


def _kinds(execution: Execution) -> list[tuple[str, str, int]]:
    with tenancy.agency_context(execution.agency_id):
        return list(
            LoopDetection.objects.filter(execution=execution)
            .order_by("detected_at")
            .values_list("kind", "outcome", "occurrences")
        )


def test_a_model_finding_nothing_with_other_arguments_is_warned_then_stopped(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = _rewording_agent(make_agent, fake_llm_server)

    execution = wait_for(_start(agent))

    assert execution.status == ExecutionStatus.FAILED
    assert execution.stop_reason == StopReason.LOOP_DETECTED
    assert "crm_search_contacts returned the same result 4 times" in execution.error
    assert execution.error_details is not None
    loop = execution.error_details["loop"]
    assert loop["kind"] == LoopKind.SAME_STATE
    assert loop["tool"] == "crm_search_contacts"
    assert loop["arguments"] == {"query": ADA_QUERIES[3]}  # the call that went past
    assert (loop["occurrences"], loop["threshold"]) == (4, 3)
    # The state is known once the call ran: the fourth ran, its step is written, no fifth turn.
    assert _tool_calls(execution) == 4
    assert _warned_results(execution) == [3]
    requests = fake_llm_server.requests_for(agent.llm_model)
    assert len(requests) == 4
    [warned] = [r for r in requests[-1].tool_results if "Loop warning" in r]
    assert "found nothing, with this same result, 3 times" in json.loads(warned)["loop_warning"]
    assert _kinds(execution) == [
        (LoopKind.SAME_STATE, LoopOutcome.WARNED, 3),
        (LoopKind.SAME_STATE, LoopOutcome.STOPPED, 4),
    ]
    with tenancy.agency_context(agent.agency_id):
        [event] = Event.objects.filter(event_type=LOOP_EVENT)
    assert event.payload["kind"] == LoopKind.SAME_STATE
    assert event.payload["outcome"] == LoopOutcome.STOPPED


def test_the_same_empty_result_is_no_loop_for_an_agent_without_loop_same_state(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    """Off by default: an agent looking up records one by one may find nothing many times."""
    agent = _rewording_agent(make_agent, fake_llm_server, loop_same_state=False)

    execution = wait_for(_start(agent))

    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    assert _tool_calls(execution) == len(ADA_QUERIES)
    assert _kinds(execution) == []


def test_the_same_informative_result_for_other_arguments_is_not_a_loop(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    """Eight searches that all find Ada: wasteful maybe, but each result says something (as a
    send to each contact answering {"ok": true} would): only results that found nothing loop."""
    agent = _rewording_agent(make_agent, fake_llm_server, ada_exists=True)

    execution = wait_for(_start(agent))

    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    assert _tool_calls(execution) == len(ADA_QUERIES)
    assert _warned_results(execution) == []
    assert _kinds(execution) == []


def test_a_model_paging_through_different_results_is_not_a_loop(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = make_agent("openai", allowed_tools=["crm_*"], loop_threshold=3)
    with tenancy.agency_context(agent.agency_id):
        for page in range(1, 7):
            Contact.objects.create(
                agency_id=agent.agency_id, first_name=f"Page{page}", email=f"p{page}@example.com"
            )
    pages = [tool_call_reply("crm_search_contacts", {"query": f"Page{n}"}) for n in range(1, 7)]
    fake_llm_server.set_responder(
        by_turn(*pages, then=text_reply("Six contacts.")), key=agent.llm_model
    )

    execution = wait_for(_start(agent))

    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    assert _tool_calls(execution) == 6
    assert _warned_results(execution) == []
    assert _kinds(execution) == []


def test_a_same_state_loop_with_ask_human_parks_and_continue_counts_on_from_there(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = _rewording_agent(make_agent, fake_llm_server, loop_action=LoopAction.ASK_HUMAN)
    person = UserFactory.create()

    execution = wait_for(_start(agent), {"waiting_input", *TERMINAL})

    assert execution.status == ExecutionStatus.WAITING_INPUT
    with tenancy.agency_context(agent.agency_id):
        [question] = Question.objects.filter(execution=execution)
    assert question.question_type == "loop"
    assert question.options == ["continue", "stop"]
    assert "crm_search_contacts returned the same result 4 times" in question.question
    assert question.context["loop"]["kind"] == LoopKind.SAME_STATE
    assert execution.input_request["question_id"] == str(question.id)
    assert _tool_calls(execution) == 4
    assert _kinds(execution) == [
        (LoopKind.SAME_STATE, LoopOutcome.WARNED, 3),
        (LoopKind.SAME_STATE, LoopOutcome.ASKED, 4),
    ]

    with tenancy.agency_context(agent.agency_id):
        question_answer(question=question, answer="continue", user_id=person.id)
    execution = wait_for(execution, {"waiting_input", *TERMINAL})
    with tenancy.agency_context(agent.agency_id):
        second = Question.objects.filter(execution=execution).exclude(pk=question.pk).get()

    # The resumed delivery counts the results so far from the conversation: 4 + 3 allowed, so
    # the seventh is warned and the eighth asks again.
    assert execution.status == ExecutionStatus.WAITING_INPUT
    assert "returned the same result 8 times" in second.question
    assert _tool_calls(execution) == 8
    assert _warned_results(execution) == [3, 7]
    requests = fake_llm_server.requests_for(agent.llm_model)
    assert "repeated results of crm_search_contacts" in requests[4].last_user_text

    with tenancy.agency_context(agent.agency_id):
        question_answer(question=second, answer="stop", user_id=person.id)
        execution.refresh_from_db()
    assert execution.status == ExecutionStatus.FAILED
    assert execution.stop_reason == StopReason.LOOP_DETECTED
    assert "after a loop: crm_search_contacts returned the same result 8 times" in execution.error
