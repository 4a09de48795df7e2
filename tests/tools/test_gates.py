"""The tool executor's gates (tools/gates.py): a gate listed in AGENTDESK_TOOL_GATES alone is
asked at its hooks in order; its refusal stops the handler, its park holds the call until a
decision, and a decided call runs once, with the edit, unless the re-check refuses it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import transaction
from django.test import override_settings

from agents.llm import ToolCall as LLMToolCall
from agents.models import Execution, ExecutionStatus
from core import tenancy
from crm.models import Contact
from tests.agents.factories import AgentFactory
from tools import registry
from tools.calls import CallRequest, Held, ToolOutcome
from tools.executor import execute_tool_call
from tools.gates import Decision, Park, Proceed, Refuse, Resumed, ToolGate, gates
from tools.handlers import ToolContext
from tools.models import ToolCall, ToolCallStatus
from tools.policy import ToolPolicy

pytestmark = pytest.mark.django_db
SEEN: list[tuple[str, str]] = []  # (gate, hook) in the order the executor asked


def _create(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    contact = Contact.objects.create(
        agency_id=ctx.agency_id, first_name=args.get("name", "Model"), email="g@x.io"
    )
    return {"id": str(contact.id)}


class FirstGate(ToolGate):
    """Holds a call whose arguments say ``hold``; on resume its decision edits the name, or
    denies it; its re-check refuses a call named ``Late``."""

    def resumed(self, request: CallRequest, existing: ToolCall) -> Resumed | None:
        SEEN.append(("first", "resumed"))
        if request.call.arguments.get("deny"):
            return Decision(refusal=Refuse("denied_here", "Somebody said no."))
        return Decision(arguments={"name": request.call.arguments.get("edit", "Edited")})

    def before_handler(
        self, request: CallRequest, policy: ToolPolicy
    ) -> Park | Refuse | Proceed | None:
        SEEN.append(("first", "before_handler"))
        if request.call.arguments.get("hold"):
            return Park(
                ToolCallStatus.WAITING_APPROVAL,
                lambda row: Held(reason="held", output={"held": str(row.id)}, record=row),
            )
        return Proceed("first let it run")

    def after_decision(self, request: CallRequest, decision: Decision) -> Refuse | None:
        SEEN.append(("first", "after_decision"))
        if decision.arguments == {"name": "Late"}:
            return Refuse("too_late", "Not any more.")
        return None


class SecondGate(ToolGate):
    """Refuses a call whose arguments say ``refuse``; sees every handler's outcome."""

    def before_handler(
        self, request: CallRequest, policy: ToolPolicy
    ) -> Park | Refuse | Proceed | None:
        SEEN.append(("second", "before_handler"))
        if request.call.arguments.get("refuse"):
            return Refuse("not_today", "No.", status=ToolCallStatus.FAILED)
        return None

    def after_handler(
        self, request: CallRequest, policy: ToolPolicy, outcome: ToolOutcome
    ) -> Park | None:
        SEEN.append(("second", "after_handler"))
        return None


GATES = ["tests.tools.test_gates.FirstGate", "tests.tools.test_gates.SecondGate"]


@pytest.fixture(autouse=True)
def gated() -> Iterator[None]:
    registry.handler("test_gated")(_create)
    SEEN.clear()
    with override_settings(AGENTDESK_TOOL_GATES=GATES):
        yield
    registry._HANDLERS.pop("test_gated")


def _execution() -> Execution:
    agent = AgentFactory.create()
    with tenancy.agency_context(agent.agency_id):
        return Execution.objects.create(
            agency_id=agent.agency_id, agent=agent, site_id=agent.site_id,
            trigger_type="manual", status=ExecutionStatus.RUNNING,
        )  # fmt: skip


def _call(execution: Execution, args: dict[str, Any], call_id: str = "call-1") -> ToolOutcome:
    policy: ToolPolicy = {"name": "test_gated", "description": "", "parameters": {}}
    request = CallRequest(
        agency_id=execution.agency_id,
        site_id=execution.site_id,
        agent_id=execution.agent_id,
        execution_id=execution.id,
        call=LLMToolCall(id=call_id, name="test_gated", arguments=args, raw_arguments="{}"),
        tools={"test_gated": policy},
        constraints=[],
    )
    with transaction.atomic(), tenancy.agency_context(execution.agency_id):
        return execute_tool_call(request)


def _names(execution: Execution) -> list[str]:
    with tenancy.agency_context(execution.agency_id):
        return list(
            Contact.objects.filter(agency_id=execution.agency_id).values_list(
                "first_name", flat=True
            )
        )


def _row(execution: Execution) -> ToolCall:
    with tenancy.agency_context(execution.agency_id):
        return ToolCall.objects.get(execution_id=execution.id)


def test_gates_are_asked_in_their_order_and_a_proceed_note_rides_on_the_outcome() -> None:
    execution = _execution()
    outcome = _call(execution, {})
    assert outcome.status == ToolCallStatus.COMPLETED
    assert outcome.notes == ("first let it run",)
    assert _names(execution) == ["Model"]
    assert SEEN == [
        ("first", "before_handler"),
        ("second", "before_handler"),
        ("second", "after_handler"),
    ]


def test_a_gates_refusal_stops_the_handler_and_is_the_calls_result() -> None:
    execution = _execution()
    outcome = _call(execution, {"refuse": True})
    assert outcome.output["error"] == {"code": "not_today", "message": "No."}
    assert outcome.status == ToolCallStatus.FAILED
    assert _names(execution) == []
    assert _row(execution).status == ToolCallStatus.FAILED
    assert ("second", "after_handler") not in SEEN


def test_a_held_call_runs_once_after_the_decision_with_its_edit() -> None:
    execution = _execution()
    held = _call(execution, {"hold": True, "edit": "Edited"})
    assert held.status == ToolCallStatus.WAITING_APPROVAL
    assert held.held is not None
    assert held.held.reason == "held"
    row = _row(execution)
    assert held.held.record == row
    assert held.output == {"held": str(row.id)}
    assert row.status == ToolCallStatus.WAITING_APPROVAL
    # The first park wins: the second gate was not asked.
    assert SEEN == [("first", "before_handler")]
    assert _names(execution) == []

    SEEN.clear()
    ran = _call(execution, {"hold": True, "edit": "Edited"})
    assert ran.status == ToolCallStatus.COMPLETED
    assert _names(execution) == ["Edited"]
    # A decided call is not asked before_handler again; every gate's re-check is.
    assert SEEN == [("first", "resumed"), ("first", "after_decision"), ("second", "after_handler")]

    again = _call(execution, {"hold": True, "edit": "Edited"})
    assert again.replayed
    assert _names(execution) == ["Edited"]  # at most once


@pytest.mark.parametrize(
    ("args", "code"),
    [({"deny": True}, "denied_here"), ({"edit": "Late"}, "too_late")],
    ids=["denied", "re-check"],
)
def test_a_decided_call_that_is_refused_does_not_run(args: dict[str, Any], code: str) -> None:
    execution = _execution()
    _call(execution, {"hold": True, **args})
    refused = _call(execution, {"hold": True, **args})
    assert refused.output["error"]["code"] == code
    assert refused.status == ToolCallStatus.DENIED
    assert _row(execution).status == ToolCallStatus.DENIED
    assert _names(execution) == []


def test_a_listed_path_that_is_no_gate_is_refused() -> None:
    with (
        override_settings(AGENTDESK_TOOL_GATES=["tools.calls.ToolOutcome"]),
        pytest.raises(TypeError, match="not a ToolGate subclass"),
    ):
        gates()
