"""A resumed conversation keeps each model reply's tool results right after it: what the run
observed while the reply's calls were running (a `wait` that ended) comes after every result of
that reply, never between them. OpenAI refuses a user message between a reply's tool messages;
Anthropic refuses a user turn whose text comes before one of its tool_result blocks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agents.llm import Message, ToolCall
from agents.models import Agent, Execution, ExecutionStatus, ExecutionStep, StepType
from agents.runtime.context import ConfigSnapshot, Resumed, rebuild_messages, think_payload
from agents.services import execution_create
from core import tenancy
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import Reply, ScriptedToolCall, by_turn, text_reply
from tests.processes import Worker, wait_for

WAITING = {"waiting_approval", "waiting_input"}


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_a_wait_before_another_call_is_observed_after_all_of_the_replys_results(
    kind: str,
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = make_agent(kind, allowed_tools=["wait", "crm_*"])
    fake_llm_server.set_responder(
        by_turn(
            Reply(
                tool_calls=(
                    ScriptedToolCall("wait", {"seconds": 1}, id="call_wait"),
                    ScriptedToolCall("crm_search_contacts", {"query": "ada"}, id="call_search"),
                )
            ),
            text_reply("Done."),
        ),
        key=agent.llm_model,
    )
    with tenancy.agency_context(agent.agency_id):
        execution = execution_create(agent=agent, input="Wait a second, then look Ada up.")
    assert execution is not None
    execution = wait_for(execution)  # it waits, and its own delayed message wakes it
    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    with tenancy.agency_context(agent.agency_id):
        states = list(execution.state_transitions.values_list("to_state", flat=True))
    assert ExecutionStatus.WAITING_INPUT in states

    requests = fake_llm_server.requests_for(agent.llm_model)
    assert len(requests) == 2
    messages = requests[1].messages
    if kind == "openai":
        tail = [(m["role"], m.get("tool_call_id")) for m in messages[-4:]]
        assert tail == [
            ("assistant", None),
            ("tool", "call_wait"),
            ("tool", "call_search"),
            ("user", None),
        ]
        assert "The wait is over" in _text(messages[-1]["content"])
    else:
        assert [m["role"] for m in messages] == ["user", "assistant", "user"]
        blocks = messages[-1]["content"]
        assert [(b["type"], b.get("tool_use_id")) for b in blocks] == [
            ("tool_result", "call_wait"),
            ("tool_result", "call_search"),
            ("text", None),
        ]
        assert "The wait is over" in blocks[-1]["text"]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content)


# --- rebuild_messages on its own, from steps as the runtime persists them ---------------------

SNAPSHOT: Any = {"system_prompt": "You help."}
WAIT_1 = ToolCall(id="w1", name="wait", arguments={"seconds": 1}, raw_arguments='{"seconds": 1}')
SEARCH = ToolCall(id="s1", name="crm_search_contacts", arguments={}, raw_arguments="{}")
SEARCH_2 = ToolCall(id="s2", name="crm_search_contacts", arguments={}, raw_arguments="{}")
WAIT_2 = ToolCall(id="w2", name="wait", arguments={"seconds": 1}, raw_arguments='{"seconds": 1}')
WAIT_3 = ToolCall(id="w3", name="wait", arguments={"seconds": 1}, raw_arguments='{"seconds": 1}')


def _steps(*kinds: tuple[str, object]) -> list[ExecutionStep]:
    """Steps numbered from 2 (step 1 observes the trigger): ("think", calls), ("act", call id),
    ("observe", text)."""
    steps = [ExecutionStep(step_number=1, step_type=StepType.OBSERVE, input_text="Go.")]
    for number, (kind, value) in enumerate(kinds, start=2):
        if kind == "think":
            assert isinstance(value, tuple)
            reply = Message.assistant("", tool_calls=value)
            steps.append(
                ExecutionStep(
                    step_number=number, step_type=StepType.THINK, llm_response=think_payload(reply)
                )
            )
        elif kind == "act":
            steps.append(
                ExecutionStep(
                    step_number=number,
                    step_type=StepType.ACT,
                    tool_call_id=str(value),
                    tool_output={"ok": value},
                )
            )
        else:
            steps.append(
                ExecutionStep(step_number=number, step_type=StepType.OBSERVE, input_text=str(value))
            )
    return steps


def _shape(messages: list[Message]) -> list[str]:
    return [
        f"tool:{m.tool_call_id}" if m.role == "tool" else f"{m.role}:{m.content}" for m in messages
    ]


def _rebuild(steps: list[ExecutionStep]) -> Resumed:
    snapshot: ConfigSnapshot = SNAPSHOT
    return rebuild_messages(snapshot, Execution(input="Go."), steps)


def test_observations_follow_every_result_of_their_reply_when_all_are_recorded() -> None:
    """wait, search, wait in one reply, each wait ending before the next call ran; then the next
    reply, which the observations precede."""
    resumed = _rebuild(
        _steps(
            ("think", (WAIT_1, SEARCH, WAIT_2)),
            ("act", "w1"),
            ("observe", "first wait over"),
            ("act", "s1"),
            ("act", "w2"),
            ("observe", "second wait over"),
            ("think", (WAIT_3,)),
            ("act", "w3"),
        )
    )
    assert resumed.pending == []
    assert resumed.observed == []
    assert _shape(resumed.messages) == [
        "system:You help.",
        "user:Go.",
        "assistant:",
        "tool:w1",
        "tool:s1",
        "tool:w2",
        "user:first wait over",
        "user:second wait over",
        "assistant:",
        "tool:w3",
    ]


def test_an_observation_waits_for_the_results_of_the_pending_calls() -> None:
    """Resumed after a wait that was the first of three calls: two still have to run, and the
    observation is handed back separately for the loop to add after their results."""
    resumed = _rebuild(
        _steps(("think", (WAIT_1, SEARCH, SEARCH_2)), ("act", "w1"), ("observe", "wait over"))
    )
    assert resumed.pending == [SEARCH, SEARCH_2]
    assert _shape(resumed.observed) == ["user:wait over"]
    # What the loop does: a result for each pending call as it runs, the observation, the reply.
    messages = [
        *resumed.messages,
        Message.tool_result("s1", "{}"),
        Message.tool_result("s2", "{}"),
        *resumed.observed,
        Message.assistant("Done."),
    ]
    assert _shape(messages)[2:] == [
        "assistant:",
        "tool:w1",
        "tool:s1",
        "tool:s2",
        "user:wait over",
        "assistant:Done.",
    ]
