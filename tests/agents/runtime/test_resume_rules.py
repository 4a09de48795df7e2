"""Rules that must hold across a run's pauses and whatever ids a provider sends: the timeout
counts running time only, max_tool_calls_per_step counts a reply's calls by their place in the
reply even after a resume, and tool call ids are unique within a run."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

import pytest

from agents.models import Agent, Execution, ExecutionStatus, StepType
from agents.services import execution_create
from approvals.models import Approval
from approvals.services import approval_decide
from core import tenancy
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import Reply, ScriptedToolCall, by_turn, text_reply
from devkit.fake_server.script import tool_call_reply as call
from tests.processes import Worker, wait_for
from tools.models import ToolCall

pytestmark = pytest.mark.slow
WAITING = {"waiting_approval", "waiting_input"}
KINDS = ["openai", "anthropic", "google"]


def _start(agent: Agent) -> Execution:
    with tenancy.agency_context(agent.agency_id):
        execution = execution_create(agent=agent, input="Go.")
    assert execution is not None
    return execution


def _tool_calls(execution: Execution) -> list[tuple[str, str, str]]:
    with tenancy.agency_context(execution.agency_id):
        return list(
            ToolCall.objects.filter(execution=execution)
            .order_by("created_at")
            .values_list("tool_name", "tool_call_id", "status")
        )


def test_time_spent_waiting_does_not_count_against_the_timeout(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    """A 3 s wait in a run allowed 2 s of running time: the run goes on after the wait."""
    agent = make_agent("openai", allowed_tools=["wait"], timeout_seconds=2)
    fake_llm_server.set_responder(
        by_turn(call("wait", {"seconds": 3}), text_reply("Waited.")), key=agent.llm_model
    )
    execution = wait_for(_start(agent))  # it waits, and its own delayed message wakes it
    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    assert execution.output == "Waited."

    # Seed 003's flow: each state a transition entered is closed by the next one.
    with tenancy.agency_context(agent.agency_id):
        states = list(
            execution.state_transitions.order_by("sequence").values(
                "to_state", "entered_at", "exited_at", "duration_ms"
            )
        )
    assert [s["to_state"] for s in states] == [
        "pending", "running", "waiting_input", "pending", "running", "completed"
    ]  # fmt: skip
    for state, following in itertools.pairwise(states):
        assert state["exited_at"] == following["entered_at"]
        expected = (state["exited_at"] - state["entered_at"]).total_seconds() * 1000
        assert state["duration_ms"] is not None
        assert abs(state["duration_ms"] - expected) <= 1
    waited = states[2]["duration_ms"]
    assert waited is not None
    assert waited >= 3000
    assert states[-1]["exited_at"] is None


@pytest.mark.parametrize("kind", KINDS)
def test_tool_call_ids_a_provider_repeats_or_leaves_out_are_made_unique(
    kind: str,
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    """The id keys a call's idempotency: a repeat must run the tool, not replay the last result."""
    agent = make_agent(kind)
    search = ScriptedToolCall("crm_search_contacts", {"query": "ada"}, id="call_1")
    fake_llm_server.set_responder(
        by_turn(
            Reply(tool_calls=(search,)),
            Reply(tool_calls=(search,)),  # the same id again, a turn later
            Reply(tool_calls=(ScriptedToolCall("crm_search_contacts", {"query": "bob"}, id=""),)),
            text_reply("Done."),
        ),
        key=agent.llm_model,
    )
    execution = wait_for(_start(agent))
    assert execution.status == ExecutionStatus.COMPLETED, execution.error

    calls = _tool_calls(execution)
    assert [status for _, _, status in calls] == ["completed"] * 3  # each ran, none replayed
    ids = [call_id for _, call_id, _ in calls]
    assert ids[0] == "call_1"
    assert len(set(ids)) == 3
    assert all(ids)
    # The model saw each result under the id the conversation gave that call.
    last = fake_llm_server.requests_for(agent.llm_model)[-1]
    assert _answered_ids(last.messages) == ids


def _answered_ids(messages: list[dict[str, Any]]) -> list[str]:
    """The call ids tool results were sent for, in any wire format."""
    ids = [str(m["tool_call_id"]) for m in messages if m.get("role") == "tool"]
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            ids += [b["tool_use_id"] for b in content if b.get("type") == "tool_result"]
        # Gemini's contents: functionResponse parts.
        parts = message.get("parts") or []
        ids += [p["functionResponse"]["id"] for p in parts if "functionResponse" in p]
    return ids


def test_max_tool_calls_per_step_counts_a_resumed_replys_calls_by_their_place(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    """Limit 2, a reply of 3 calls whose second waits for approval: after the approval the
    second runs and the third is refused, as it would have been without the pause."""
    agent = make_agent(
        "openai",
        allowed_tools=["crm_*", "email_*"],
        max_tool_calls_per_step=2,
        constraints=[{"type": "require_approval", "tools": ["email_*"], "description": "human"}],
    )
    email = {"to": ["client@example.com"], "subject": "Hi", "body": "Hello"}
    fake_llm_server.set_responder(
        by_turn(
            Reply(
                tool_calls=(
                    ScriptedToolCall("crm_search_contacts", {"query": "ada"}),
                    ScriptedToolCall("email_send", email),
                    ScriptedToolCall("crm_search_contacts", {"query": "bob"}),
                )
            ),
            text_reply("Done."),
        ),
        key=agent.llm_model,
    )
    execution = wait_for(_start(agent), WAITING)
    with tenancy.agency_context(agent.agency_id):
        approval = Approval.objects.get(execution=execution)
        approval_decide(approval=approval, approve=True, user_id=None)
    execution = wait_for(execution)
    assert execution.status == ExecutionStatus.COMPLETED, execution.error

    assert [name for name, _, _ in _tool_calls(execution)] == ["crm_search_contacts", "email_send"]
    with tenancy.agency_context(agent.agency_id):
        last_act = execution.steps.filter(step_type=StepType.ACT).order_by("-step_number").first()
    assert last_act is not None
    assert last_act.tool_input == {"query": "bob"}
    assert json.dumps(last_act.tool_output).count("max_tool_calls") == 1
