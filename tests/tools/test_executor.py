"""The tool executor inside a step's transaction: a failing handler's writes roll back, the
failure is recorded for the model, and the transaction stays usable for the step's own rows —
with the savepoint the runtime creates in its first round trip, and with the executor's own."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection, transaction

from agents.llm import ToolCall as LLMToolCall
from agents.models import Execution, ExecutionStatus
from core import tenancy
from crm.models import Contact
from tests.agents.factories import AgentFactory
from tools import registry
from tools.calls import CallRequest
from tools.executor import execute_tool_call
from tools.handlers import ToolContext, ToolError
from tools.models import ToolCall, ToolCallStatus
from tools.policy import ToolPolicy

pytestmark = pytest.mark.django_db
SAVEPOINT = "agentdesk_tool"


def _write_then_raise(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    Contact.objects.create(agency_id=ctx.agency_id, first_name="Partial", email="p@x.io")
    if args.get("database_error"):
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1/0")  # aborts the transaction up to the savepoint
    raise ToolError("boom", "The tool gave up half way.")


def _unstorable(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    # What a fetched page or a provider may hand a handler, passed on as it came.
    return {"text": "before\x00after", "score": float("nan"), "items": [float("inf")]}


def _write(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    contact = Contact.objects.create(agency_id=ctx.agency_id, first_name="Kept", email="k@x.io")
    return {"id": str(contact.id)}


@pytest.fixture(autouse=True)
def test_handlers() -> Iterator[None]:
    registry.handler("test_write_then_raise")(_write_then_raise)
    registry.handler("test_write")(_write)
    registry.handler("test_unstorable")(_unstorable)
    yield
    registry._HANDLERS.pop("test_write_then_raise")
    registry._HANDLERS.pop("test_write")
    registry._HANDLERS.pop("test_unstorable")


def _policy(name: str) -> ToolPolicy:
    return {"name": name, "description": "", "parameters": {"type": "object"}}


def _request(execution: Execution, name: str, args: dict[str, Any], **extra: Any) -> CallRequest:
    return CallRequest(
        agency_id=execution.agency_id,
        site_id=execution.site_id,
        agent_id=execution.agent_id,
        execution_id=execution.id,
        call=LLMToolCall(
            id=f"call-{uuid.uuid4().hex[:6]}", name=name, arguments=args, raw_arguments="{}"
        ),
        tools={n: _policy(n) for n in ("test_write_then_raise", "test_write", "test_unstorable")},
        constraints=[],
        may_have_run=False,
        **extra,
    )


def _execution() -> Execution:
    agent = AgentFactory.create()
    with tenancy.agency_context(agent.agency_id):
        return Execution.objects.create(
            agency_id=agent.agency_id, agent=agent, site_id=agent.site_id,
            trigger_type="manual", status=ExecutionStatus.RUNNING,
        )  # fmt: skip


@pytest.mark.parametrize("database_error", [False, True])
@pytest.mark.parametrize("runtime_savepoint", [True, False])
def test_a_failing_handler_leaves_nothing_and_the_step_goes_on(
    runtime_savepoint: bool, database_error: bool
) -> None:
    execution = _execution()
    then = [f"SAVEPOINT {SAVEPOINT}"] if runtime_savepoint else []
    extra = {"savepoint": SAVEPOINT} if runtime_savepoint else {}
    with transaction.atomic(), tenancy.agency_context(execution.agency_id, then=then):
        outcome = execute_tool_call(
            _request(
                execution, "test_write_then_raise", {"database_error": database_error}, **extra
            )
        )
        # The transaction is usable: the failure is recorded and later queries run.
        assert not Contact.objects.filter(agency_id=execution.agency_id).exists()
        recorded = ToolCall.objects.get(execution_id=execution.id)

    assert outcome.output["error"]["code"] == ("internal_error" if database_error else "boom")
    assert recorded.status == ToolCallStatus.FAILED
    assert recorded.duration_ms is not None
    assert recorded.started_at is not None
    assert recorded.completed_at is not None
    assert recorded.started_at <= recorded.completed_at


def test_a_succeeding_handler_keeps_its_writes_after_the_runtime_savepoint() -> None:
    execution = _execution()
    with (
        transaction.atomic(),
        tenancy.agency_context(execution.agency_id, then=[f"SAVEPOINT {SAVEPOINT}"]),
    ):
        outcome = execute_tool_call(_request(execution, "test_write", {}, savepoint=SAVEPOINT))
        assert Contact.objects.filter(pk=outcome.output["id"]).exists()
        assert ToolCall.objects.get(execution_id=execution.id).status == ToolCallStatus.COMPLETED


def test_a_handlers_output_is_recorded_even_with_what_jsonb_refuses() -> None:
    execution = _execution()
    with transaction.atomic(), tenancy.agency_context(execution.agency_id):
        outcome = execute_tool_call(_request(execution, "test_unstorable", {}))
        recorded = ToolCall.objects.get(execution_id=execution.id)

    expected = {"text": "before\ufffdafter", "score": None, "items": [None]}
    assert outcome.output == expected
    assert (recorded.status, recorded.output) == (ToolCallStatus.COMPLETED, expected)
