"""One tool call as the executor takes it (:class:`CallRequest`) and decides it
(:class:`ToolOutcome`): the types the runtime, the executor and its gates share
(tools/executor.py, tools/gates.py)."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agents.llm import ToolCall as LLMToolCall
from core import fastdb
from tools.handlers import AwaitRun, HumanQuestion, ToolError
from tools.policy import ToolPolicy


@dataclass(frozen=True)
class CallRequest:
    agency_id: uuid.UUID
    site_id: uuid.UUID
    agent_id: uuid.UUID
    execution_id: uuid.UUID
    call: LLMToolCall
    tools: dict[str, ToolPolicy]  # the tools this run may use, by name
    constraints: list[Any]  # the agent's constraints (some require approval)
    triggered_by_user_id: int | None = None
    # A call of a reply persisted before this delivery (a resumed run) may have run already;
    # a call of a reply this delivery just received cannot have, so it skips the lookup.
    may_have_run: bool = True
    # Where the ToolCall row goes: inserted now, or handed to the caller to write together with
    # its own rows (the runtime's one-statement step commit).
    insert: Callable[[fastdb.Parts], None] | None = None
    # A savepoint the caller created just before (in its transaction's first round trip): a
    # failing handler's writes roll back to it. Without one, the handler gets its own.
    savepoint: str | None = None


@dataclass(frozen=True, slots=True)
class Held:
    """A call a gate holds for a person (tools/gates.py), as its outcome carries it: the run
    parks with ``reason`` and ``input_request``; ``output`` is the call's output meanwhile
    (traced, not shown to the model); ``record`` is the gate's own row (an approval, a
    question) for its app's run plugins (flow's decision points)."""

    reason: str
    output: dict[str, Any]
    input_request: Mapping[str, Any] | None = None
    record: object = None


@dataclass
class ToolOutcome:
    output: dict[str, Any]
    status: str
    park_until: datetime.datetime | None = None
    # Set when a gate holds the call for a person (an approval, an answer): the run parks with
    # ``status`` (waiting_approval or waiting_input, a run's status of the same name).
    held: Held | None = None
    after_commit: list[Callable[[], None]] = field(default_factory=list)
    replayed: bool = False  # the call had already run: its recorded result was returned
    # The call asked a person in an earlier delivery of the run (held for their answer, which
    # settles it now, or it still waits): it was counted as the run's tool call then.
    asked_before: bool = False
    ask: HumanQuestion | None = None  # the handler asks a person (ask_user)
    awaiting: AwaitRun | None = None  # the call now waits for another run (delegate_to_agent)
    # What the gates that let the call run said about it (a risk rule that matched and let it
    # run without a person: flow's decision point); see tools.gates.Proceed.
    notes: tuple[object, ...] = ()

    @property
    def is_error(self) -> bool:
        return "error" in self.output


def tool_error(code: str, message: str, **details: Any) -> dict[str, Any]:
    """A refusal or failure as the model sees it (``{"error": {"code", "message", ...}}``)."""
    return ToolError(code, message, **details).as_output()
