"""An ask_user call counts as the run's tool call from the moment it asks (issue 27 item 2): the
run page's header said 0 tool calls while the run waited for the answer to it, though the call
had been made. It is counted once: not again when the answer settles it."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agents.models import Agent, Execution, ExecutionStatus
from approvals.questions import question_answer
from core import tenancy
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import by_turn, text_reply, tool_call_reply
from live.selectors import execution_snapshot
from tests.approvals.test_questions import ASK, _question, _waiting_run
from tests.factories import UserFactory
from tests.processes import Worker, wait_for
from usage.models import UsageDaily

pytestmark = pytest.mark.slow


def _snapshot_tool_calls(execution: Execution) -> int:
    with tenancy.agency_context(execution.agency_id):
        fresh = Execution.objects.select_related("agent").get(pk=execution.pk)
        return execution_snapshot(fresh)["totals"]["tool_call_count"]


def test_an_ask_user_call_is_counted_when_it_asks_and_once(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = make_agent("openai", allowed_tools=["ask_user", "crm_search_contacts"])
    fake_llm_server.set_responder(
        by_turn(
            tool_call_reply("crm_search_contacts", {"query": "Ana"}),
            tool_call_reply("ask_user", ASK),
            text_reply("The Pro offer it is."),
        ),
        key=agent.llm_model,
    )

    execution = _waiting_run(agent)

    assert execution.status == ExecutionStatus.WAITING_INPUT
    assert execution.tool_call_count == 2  # the search, and the question out
    assert _snapshot_tool_calls(execution) == 2  # what the run page's header shows
    with tenancy.agency_context(agent.agency_id):
        question_answer(
            question=_question(execution), answer="Pro", user_id=UserFactory.create().id
        )
    execution = wait_for(execution)
    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    assert execution.tool_call_count == 2
    with tenancy.agency_context(agent.agency_id):
        usage = UsageDaily.objects.get(agent=agent)
    assert usage.tool_calls == 2
