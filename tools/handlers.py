"""The contract between the tool executor and a tool's handler.

A handler is ``handler(context, arguments) -> dict | ToolResult``. It runs inside the executor's
transaction, under the execution's agency (row-level security applies), and its database writes
commit together with the tool call's recorded result: a crash either keeps both or neither, so a
tool is applied at most once. Arguments were already validated against the tool's JSON Schema.

A handler reports an expected failure by raising :class:`ToolError` with a code; the model gets
``{"error": {"code", "message", ...}}`` and the run continues. Anything else raised is a bug: the
executor records it as ``internal_error`` and the run continues too.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ToolContext:
    agency_id: uuid.UUID
    site_id: uuid.UUID
    agent_id: uuid.UUID
    execution_id: uuid.UUID
    tool_call_id: str  # the provider's id of this call
    idempotency_key: str  # unique per (execution, tool call): external side effects use it
    triggered_by_user_id: int | None = None


@dataclass(frozen=True)
class HumanQuestion:
    """A question the run waits on (the ``ask_user`` tool): the person's answer becomes the
    call's result when the run resumes."""

    question: str
    options: list[str] = field(default_factory=list)
    allow_other: bool = True  # any text, not only one of the options
    question_type: str = ""


@dataclass(frozen=True)
class AwaitRun:
    """Another run the call waits for (``delegate_to_agent``): the run parks, holding no worker,
    until then (``until``: when the wait expires) and says so in its ``input_request``; the
    tool's resumer (tools.registry.resumer) gives the call's result when it resumes."""

    execution_id: uuid.UUID
    until: datetime.datetime | None = None
    input_request: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolResult:
    """A handler's result when it needs more than an output dict."""

    output: dict[str, Any]
    # The execution waits, holding no worker, until then (the `wait` tool).
    park_until: datetime.datetime | None = None
    # Work to do after the transaction commits (e.g. hand an email to the mail backend).
    after_commit: list[Callable[[], None]] = field(default_factory=list)
    # The execution waits for a person's answer, which then replaces ``output`` as the result.
    ask: HumanQuestion | None = None
    # The execution waits for another run (delegate_to_agent), whose result becomes this one's.
    await_run: AwaitRun | None = None


class ToolError(Exception):
    """An expected tool failure, returned to the model as a structured error."""

    def __init__(self, code: str, message: str, **details: Any) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details

    def as_output(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details:
            error["details"] = self.details
        return {"error": error}


Handler = Callable[[ToolContext, dict[str, Any]], "dict[str, Any] | ToolResult"]
# A waiting call's result when its run resumes: ``resumer(context, arguments, waiting output)``;
# a ToolResult with ``await_run`` set means it still waits.
Resumer = Callable[[ToolContext, dict[str, Any], dict[str, Any]], "dict[str, Any] | ToolResult"]
