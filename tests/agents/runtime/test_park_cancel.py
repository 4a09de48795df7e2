"""A cancel that arrives while a run parks (the approval gate, a `wait` timer) comes back with
the park's write: the waiting run is cancelled at once, not when it would next be resumed. In
this process: the run's thread, the real database and fake provider; the cancel comes from
another connection at the moment the tool's outcome is known."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agents.models import Agent, Execution, ExecutionStatus
from agents.runtime import act
from agents.runtime.loop import run_execution
from approvals.models import Approval, ApprovalStatus
from core import tenancy
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import by_turn, text_reply, tool_call_reply
from tests.processes import cancel_from_elsewhere, pending_execution
from tools.models import ToolCall

APPROVE_EMAIL = {"type": "require_approval", "tools": ["email_*"], "description": "human"}


def _cancel_when(
    monkeypatch: pytest.MonkeyPatch, execution: Execution, parks: Callable[[Any], bool]
) -> None:
    real = act.execute_tool_call

    def outcome_then_cancel(*args: Any, **kwargs: Any) -> Any:
        outcome = real(*args, **kwargs)
        if parks(outcome):
            cancel_from_elsewhere(execution)
        return outcome

    monkeypatch.setattr(act, "execute_tool_call", outcome_then_cancel)


def _status(execution: Execution) -> str:
    with tenancy.agency_context(execution.agency_id):
        return str(Execution.objects.get(pk=execution.pk).status)


def test_a_cancel_during_the_approval_park_cancels_the_run_and_its_approval(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    agent = make_agent("openai", allowed_tools=["email_*"], constraints=[APPROVE_EMAIL])
    fake_llm_server.set_responder(
        by_turn(
            tool_call_reply("email_send", {"to": ["c@example.com"], "subject": "S", "body": "B"}),
            text_reply("Sent."),
        ),
        key=agent.llm_model,
    )
    execution = pending_execution(agent, input_text="Write.")
    _cancel_when(monkeypatch, execution, lambda outcome: outcome.held is not None)
    assert run_execution(execution.id, agency_id=agent.agency_id) == "cancelled"
    assert _status(execution) == ExecutionStatus.CANCELLED
    with tenancy.agency_context(agent.agency_id):
        approvals = [a.status for a in Approval.objects.filter(execution=execution)]
        calls = [c.status for c in ToolCall.objects.filter(execution=execution)]
    assert approvals == [ApprovalStatus.CANCELLED]
    assert calls == ["cancelled"]


def test_a_cancel_during_the_wait_park_cancels_the_run(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    agent = make_agent("openai", allowed_tools=["wait"])
    fake_llm_server.set_responder(
        by_turn(tool_call_reply("wait", {"seconds": 600}), text_reply("Waited.")),
        key=agent.llm_model,
    )
    execution = pending_execution(agent, input_text="Wait.")
    _cancel_when(monkeypatch, execution, lambda outcome: outcome.park_until is not None)
    assert run_execution(execution.id, agency_id=agent.agency_id) == "cancelled"
    assert _status(execution) == ExecutionStatus.CANCELLED
