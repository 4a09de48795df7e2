"""An execution seen as an A2A task: the task's id is the execution's, its state the run's status
mapped onto A2A's states, its artefact the run's output.

| execution status                      | A2A task state              |
|---------------------------------------|-----------------------------|
| pending                               | ``TASK_STATE_SUBMITTED``     |
| running, waiting_agent (a delegation) | ``TASK_STATE_WORKING``       |
| waiting_approval, waiting_input       | ``TASK_STATE_INPUT_REQUIRED`` |
| waiting_input on a timer              | ``TASK_STATE_WORKING``       |
| completed                             | ``TASK_STATE_COMPLETED``     |
| failed, timed_out                     | ``TASK_STATE_FAILED``        |
| cancelled                             | ``TASK_STATE_CANCELED``      |
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from a2a.types.a2a_pb2 import (
    Artifact,
    Message,
    Part,
    Role,
    Task,
    TaskState,
    TaskStatus,
)
from google.protobuf.struct_pb2 import Struct, Value

from agents.models import Execution, ExecutionStatus
from protocols.runs import TIMER_KINDS

# Kept in the run's trigger data (beside protocols.runs' ``_via``): the caller's context id.
CONTEXT_KEY = "_a2a_context_id"

STATES: dict[str, int] = {
    ExecutionStatus.PENDING: TaskState.TASK_STATE_SUBMITTED,
    ExecutionStatus.RUNNING: TaskState.TASK_STATE_WORKING,
    ExecutionStatus.WAITING_AGENT: TaskState.TASK_STATE_WORKING,
    ExecutionStatus.WAITING_APPROVAL: TaskState.TASK_STATE_INPUT_REQUIRED,
    ExecutionStatus.WAITING_INPUT: TaskState.TASK_STATE_INPUT_REQUIRED,
    ExecutionStatus.COMPLETED: TaskState.TASK_STATE_COMPLETED,
    ExecutionStatus.FAILED: TaskState.TASK_STATE_FAILED,
    ExecutionStatus.TIMED_OUT: TaskState.TASK_STATE_FAILED,
    ExecutionStatus.CANCELLED: TaskState.TASK_STATE_CANCELED,
}
# A stream ends at these (A2A: terminal, or interrupted until the client acts).
FINAL_STATES = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_INPUT_REQUIRED,
    }
)

_FIELDS = (
    "id",
    "agent_id",
    "status",
    "stop_reason",
    "input",
    "output",
    "result",
    "error",
    "input_request",
    "trigger_data",
    "updated_at",
)


@dataclass(frozen=True)
class TaskRow:
    """What a task is built from: one read of the execution's row."""

    id: uuid.UUID
    agent_id: uuid.UUID
    status: str
    stop_reason: str
    input: str
    output: str
    error: str
    updated_at: datetime
    result: dict[str, Any] = field(default_factory=dict)
    input_request: dict[str, Any] = field(default_factory=dict)
    trigger_data: dict[str, Any] = field(default_factory=dict)

    @property
    def state(self) -> int:
        on_a_clock = self.input_request.get("kind") in TIMER_KINDS
        if self.status == ExecutionStatus.WAITING_INPUT and on_a_clock:
            return TaskState.TASK_STATE_WORKING
        return STATES.get(self.status, TaskState.TASK_STATE_WORKING)

    @property
    def settled(self) -> bool:
        """Nothing changes without a person (or never again): waiting longer does not help."""
        return self.state in FINAL_STATES

    @property
    def context_id(self) -> str:
        return str(self.trigger_data.get(CONTEXT_KEY) or self.id)


def task_row(*, agent_id: uuid.UUID, task_id: str) -> TaskRow | None:
    """The agent's execution ``task_id``; ``None`` alike for a malformed id, a made-up one,
    another agent's and another agency's. Precondition: the caller's agency context."""
    try:
        pk = uuid.UUID(task_id)
    except ValueError:
        return None
    row = Execution.objects.filter(pk=pk, agent_id=agent_id).values(*_FIELDS).first()
    if row is None:
        return None
    for key in ("result", "input_request", "trigger_data"):
        row[key] = row[key] if isinstance(row[key], dict) else {}
    return TaskRow(**row)


def _struct(data: dict[str, Any]) -> Struct:
    struct = Struct()
    struct.update(data)
    return struct


def _data_part(data: dict[str, Any]) -> Part:
    value = Value()
    value.struct_value.update(data)
    return Part(data=value, media_type="application/json")


def _status_message(row: TaskRow) -> Message | None:
    """What the agent tells the caller beside the state: what it waits for, or why it stopped."""
    parts: list[Part] = []
    if row.state == TaskState.TASK_STATE_INPUT_REQUIRED:
        request = row.input_request
        if row.status == ExecutionStatus.WAITING_APPROVAL:
            text = "Waiting for an approver in AgentDesk to decide a risky action."
        else:
            text = str(request.get("question") or "Waiting for an answer in AgentDesk.")
        parts.append(Part(text=text))
        if request:
            parts.append(_data_part({"status": row.status, "input_request": request}))
    elif row.state in (TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_CANCELED):
        parts.append(Part(text=row.error or row.stop_reason or row.status))
    if not parts:
        return None
    return Message(
        message_id=f"{row.id}-status",
        task_id=str(row.id),
        context_id=row.context_id,
        role=Role.ROLE_AGENT,
        parts=parts,
    )


def output_artifact(row: TaskRow) -> Artifact | None:
    """The run's output as one artefact (its text, and its structured result when it has
    one); none before the run completed."""
    if row.status != ExecutionStatus.COMPLETED:
        return None
    parts = [Part(text=row.output)]
    if row.result:
        parts.append(_data_part(row.result))
    return Artifact(artifact_id=f"{row.id}-output", name="output", parts=parts)


def task_status(row: TaskRow) -> TaskStatus:
    status = TaskStatus(state=row.state)  # type: ignore[arg-type]
    status.timestamp.FromDatetime(row.updated_at)
    message = _status_message(row)
    if message is not None:
        status.message.CopyFrom(message)
    return status


def task_of(row: TaskRow, *, history_length: int | None = None) -> Task:
    """The A2A task of ``row``: its status, its output artefact, and its history (the caller's
    message; ``history_length`` 0 leaves it out)."""
    task = Task(
        id=str(row.id),
        context_id=row.context_id,
        status=task_status(row),
        metadata=_struct({"agentdesk_status": row.status, "agent_id": str(row.agent_id)}),
    )
    artifact = output_artifact(row)
    if artifact is not None:
        task.artifacts.append(artifact)
    if history_length is None or history_length > 0:
        task.history.append(
            Message(
                message_id=f"{row.id}-input",
                task_id=str(row.id),
                context_id=row.context_id,
                role=Role.ROLE_USER,
                parts=[Part(text=row.input)],
            )
        )
    return task
