"""What the runtime's hooks receive and return (agents/runtime/plugins.py, the port, re-exports
them for plugin authors): the step writer a hook adds rows with, the verdicts (:class:`Park`,
:class:`Finish`), a plugin's own model call (:class:`Consult`), the run being set up and the
model call about to be made."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from agents.llm import Completion, Message, MessageDict
from agents.models import Agent, Execution, ExecutionStatus
from core import fastdb

if TYPE_CHECKING:
    from django.db.models import Model

    from tools.policy import ToolPolicy
    from usage.pricing import Price


class StepWriter(Protocol):
    """What a hook may do with the step's transaction: add rows to its one statement."""

    @property
    def execution(self) -> Execution: ...

    def defer_insert(self, obj: Model) -> None: ...

    def defer_row(self, parts: fastdb.Parts) -> None: ...


@dataclass(frozen=True, slots=True)
class Park:
    """The run waits (no worker held) until something resumes it. ``write`` runs inside the
    park's transaction once the park is set on the execution (its status, ``wait_until``):
    rows, a question, work sent after the commit; it may return the input request, which
    then replaces ``input_request``."""

    reason: str
    input_request: Mapping[str, Any] | None = None
    status: str = ExecutionStatus.WAITING_INPUT
    wait_until: datetime.datetime | None = None
    write: Callable[[StepWriter], Mapping[str, Any] | None] | None = None


@dataclass(frozen=True, slots=True)
class Finish:
    """The run ends so; ``write`` adds what ends it to the same transaction (before the end
    is recorded)."""

    status: str
    stop_reason: str
    error: str = ""
    error_details: dict[str, Any] | None = None
    write: Callable[[StepWriter], None] | None = None


type Verdict = Park | Finish


@dataclass(frozen=True, slots=True)
class Consulted:
    """A plugin's :class:`Consult` decided: its ``reflect`` step's ``output_text`` and
    ``llm_response`` (``record``; the call's usage is added), and a verdict (None: go on)."""

    output_text: str
    record: dict[str, Any]
    verdict: Verdict | None = None


@dataclass(frozen=True, slots=True)
class Consult:
    """A model call of a plugin's own, made by the kernel before the step's (``before_step``),
    without tools: paid as any model call (limits, ``before_model_call``, budget, tokens and
    cost on the run), not one of ``max_steps_per_run``. Its ``reflect`` step is written in one
    transaction with ``decide(writer, completion, step_id)``'s rows and verdict."""

    purpose: str  # in the run's error if the call fails: "understanding the request"
    messages: Sequence[Message]
    max_tokens: int  # at most the agent's
    decide: Callable[[StepWriter, Completion, uuid.UUID], Consulted]


@dataclass(slots=True)
class RunSetup:
    """A run's start being decided (its first claim, in its transaction and agency): what the
    ``setup`` hooks may change before the system prompt is rendered."""

    agent: Agent
    execution: Execution
    tools: list[ToolPolicy]  # a shared cached list: replace it, never change it in place
    memories: list[str] = field(default_factory=list)
    episodes: list[str] = field(default_factory=list)
    conversation: list[MessageDict] = field(default_factory=list)
    conversation_key: dict[str, str] | None = None


@dataclass(frozen=True, slots=True)
class ModelCall:
    """The model call about to be made: its price and estimated input (``summary``: it
    summarises the run's history)."""

    price: Price
    input_tokens: int
    summary: bool = False
