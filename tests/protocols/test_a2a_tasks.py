"""An execution's row as an A2A task (protocols/a2a/tasks.py): every status's state, what a
waiting task says it waits for, the output artefact only once the run completed, and the row
found only for its agent in its agency."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import pytest
from a2a.types.a2a_pb2 import TaskState
from google.protobuf.json_format import MessageToDict

from agents.models import ExecutionStatus
from core import tenancy
from protocols.a2a.tasks import TaskRow, task_of, task_row
from tests.agents.factories import AgentFactory, ExecutionFactory
from tests.factories import AgencyFactory


def _row(status: str, **fields: Any) -> TaskRow:
    values: dict[str, Any] = {
        "id": uuid.uuid4(),
        "agent_id": uuid.uuid4(),
        "status": status,
        "stop_reason": "",
        "input": "Do it.",
        "output": "",
        "error": "",
        "updated_at": datetime.datetime(2026, 11, 29, 10, 0, tzinfo=datetime.UTC),
    }
    values.update(fields)
    return TaskRow(**values)


@pytest.mark.parametrize(
    ("status", "input_request", "state"),
    [
        (ExecutionStatus.PENDING, {}, TaskState.TASK_STATE_SUBMITTED),
        (ExecutionStatus.RUNNING, {}, TaskState.TASK_STATE_WORKING),
        (ExecutionStatus.WAITING_AGENT, {}, TaskState.TASK_STATE_WORKING),
        (ExecutionStatus.WAITING_APPROVAL, {}, TaskState.TASK_STATE_INPUT_REQUIRED),
        (ExecutionStatus.WAITING_INPUT, {"kind": "question"}, TaskState.TASK_STATE_INPUT_REQUIRED),
        # The `wait` tool's timer and a provider's rate limit wait for no person.
        (ExecutionStatus.WAITING_INPUT, {"kind": "timer"}, TaskState.TASK_STATE_WORKING),
        (
            ExecutionStatus.WAITING_INPUT,
            {"kind": "provider_rate_limit"},
            TaskState.TASK_STATE_WORKING,
        ),
        (ExecutionStatus.COMPLETED, {}, TaskState.TASK_STATE_COMPLETED),
        (ExecutionStatus.FAILED, {}, TaskState.TASK_STATE_FAILED),
        (ExecutionStatus.TIMED_OUT, {}, TaskState.TASK_STATE_FAILED),
        (ExecutionStatus.CANCELLED, {}, TaskState.TASK_STATE_CANCELED),
    ],
)
def test_each_status_has_its_task_state(
    status: str, input_request: dict[str, Any], state: int
) -> None:
    assert task_of(_row(status, input_request=input_request)).status.state == state


def test_a_question_is_the_status_message_of_an_input_required_task() -> None:
    request = {"kind": "question", "question": "Which region?", "question_id": "q1"}
    task = task_of(_row(ExecutionStatus.WAITING_INPUT, input_request=request))
    parts = task.status.message.parts
    assert parts[0].text == "Which region?"
    assert MessageToDict(parts[1].data)["input_request"] == request


def test_only_a_completed_run_has_its_output_and_result_as_the_artefact() -> None:
    done = task_of(_row(ExecutionStatus.COMPLETED, output="42", result={"answer": 42}))
    [artifact] = done.artifacts
    assert artifact.parts[0].text == "42"
    assert MessageToDict(artifact.parts[1].data) == {"answer": 42}
    failed = task_of(_row(ExecutionStatus.FAILED, output="partial", error="Provider down."))
    assert not failed.artifacts
    assert failed.status.message.parts[0].text == "Provider down."


def test_the_context_is_the_callers_or_else_the_task_and_history_can_be_left_out() -> None:
    row = _row(ExecutionStatus.RUNNING, trigger_data={"_a2a_context_id": "conversation-7"})
    assert task_of(row).context_id == "conversation-7"
    assert task_of(row).history[0].parts[0].text == "Do it."
    assert not task_of(row, history_length=0).history
    plain = _row(ExecutionStatus.RUNNING)
    assert task_of(plain).context_id == str(plain.id)


@pytest.mark.django_db
def test_task_row_finds_the_agents_execution_and_no_other_agents_or_agencys() -> None:
    execution = ExecutionFactory.create(input="Mine.")
    other_agent = AgentFactory.create(agency=execution.agency, site=execution.site)
    elsewhere = AgencyFactory.create()
    with tenancy.agency_context(execution.agency_id):
        row = task_row(agent_id=execution.agent_id, task_id=str(execution.id))
        assert row is not None
        assert row.input == "Mine."
        assert task_row(agent_id=other_agent.id, task_id=str(execution.id)) is None
        assert task_row(agent_id=execution.agent_id, task_id="not-a-uuid") is None
    with tenancy.agency_context(elsewhere.id):
        assert task_row(agent_id=execution.agent_id, task_id=str(execution.id)) is None
