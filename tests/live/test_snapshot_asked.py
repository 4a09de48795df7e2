"""The execution's snapshot names each call that asked a person (ask_user) with the park it
caused (``asked``), while it waits and after the answer: the run page draws the call's act step,
written only with the answer, before that park, by the call's id rather than by guessing."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agents.models import Agent, Execution, ExecutionStatus, StateTransition
from approvals.models import Question, QuestionStatus
from approvals.questions import question_answer
from core import tenancy
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import Reply, ScriptedToolCall, by_turn, text_reply
from live.protocol import Snapshot
from live.selectors import execution_snapshot
from tests.approvals.test_questions import ASK, _waiting_run
from tests.factories import UserFactory
from tests.processes import Worker, wait_for

pytestmark = pytest.mark.slow


def _ask(call_id: str) -> Reply:
    return Reply(tool_calls=(ScriptedToolCall("ask_user", ASK, id=call_id),))


def _snapshot(execution: Execution) -> Snapshot:
    with tenancy.agency_context(execution.agency_id):
        fresh = Execution.objects.select_related("agent").get(pk=execution.pk)
        return execution_snapshot(fresh)


def _parks(execution: Execution) -> list[int]:
    with tenancy.agency_context(execution.agency_id):
        return list(
            StateTransition.objects.filter(
                execution_id=execution.id, to_state=ExecutionStatus.WAITING_INPUT
            )
            .order_by("sequence")
            .values_list("sequence", flat=True)
        )


def _answer(execution: Execution) -> None:
    with tenancy.agency_context(execution.agency_id):
        question = Question.objects.get(execution=execution, status=QuestionStatus.PENDING)
        question_answer(question=question, answer="Pro", user_id=UserFactory.create().id)


def test_the_snapshot_names_each_asking_call_with_the_park_it_caused(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = make_agent("openai", allowed_tools=["ask_user"])
    fake_llm_server.set_responder(
        by_turn(_ask("call_first"), _ask("call_second"), text_reply("The Pro offer it is.")),
        key=agent.llm_model,
    )
    execution = _waiting_run(agent)
    [first_park] = _parks(execution)
    snapshot = _snapshot(execution)
    assert snapshot["waiting"] is not None
    assert snapshot["waiting"]["tool_call_id"] == "call_first"
    assert snapshot["asked"] == {"call_first": first_park}

    _answer(execution)  # the run resumes, writes the first call's step, and asks again
    execution = wait_for(execution, {ExecutionStatus.WAITING_INPUT})
    second_park = _parks(execution)[1]
    assert _snapshot(execution)["asked"] == {"call_first": first_park, "call_second": second_park}

    _answer(execution)
    execution = wait_for(execution)
    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    snapshot = _snapshot(execution)
    assert snapshot["waiting"] is None
    assert snapshot["asked"] == {"call_first": first_park, "call_second": second_park}
