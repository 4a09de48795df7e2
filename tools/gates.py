"""The tool executor's gates (docs/decisions/0009-runtime-plugins.md, "Tool gates"): what holds
a call for a person, or refuses it, around its handler, plugged in the way run plugins are.

The executor (tools/executor.py) runs policy, argument validation, rate limits, the handler and
the call's record; it knows no feature. A gate is a :class:`ToolGate` subclass named in
``settings.AGENTDESK_TOOL_GATES`` (dotted paths, in order; approvals' is approvals/tool_gate.py).
It overrides only the hooks it needs, in the order a call meets them:

==================  ============================================================================
``resumed``         a call an earlier delivery left waiting for a person (``waiting_approval``,
                    or ``waiting_input`` and not waiting for another run): the person's
                    :class:`Decision` (it may run now, once), its :class:`Settled` result (an
                    answer), :class:`Held` (still waiting), or None (not this gate's call)
``before_handler``  a call about to run the first time, offered, its modules on, its arguments
                    valid, within its rate limits: :class:`Park` (hold it for a person),
                    :class:`Refuse`, :class:`Answer` (its result, the handler not run),
                    :class:`Proceed` (run it, with a note), or None (no say)
``after_decision``  a decided call about to run, its policy and arguments checked again: a
                    :class:`Refuse` when it may no longer run (the re-check), or None
``after_handler``   the handler ran: :class:`Park` to hold the call (ask_user: the person's
                    answer becomes its result), or None
==================  ============================================================================

For each hook the gates are asked in the list's order and the first verdict other than a proceed
wins: the gates after it are not asked. A call a person decided is not asked ``before_handler``
again (the decision is the gate's say); every gate's ``after_decision`` is. The executor applies
a verdict with its own writes, in the caller's transaction: a held call's row waits with the
park's status until the run resumes; a refused call is recorded as not run, with the refusal as
its result for the model.

The list is loaded once per process (:func:`gates`, cached per list, so ``override_settings``
gives a test its own), one object per gate: a gate keeps no state of a call.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.utils.module_loading import import_string

from tools.calls import Held
from tools.models import ToolCallStatus

if TYPE_CHECKING:
    from tools.calls import CallRequest, ToolOutcome
    from tools.models import ToolCall
    from tools.policy import ToolPolicy


@dataclass(frozen=True, slots=True)
class Park:
    """Hold the call for a person. The executor writes the call's row waiting with ``status``
    (``waiting_approval`` or ``waiting_input``: the run parks with the status of the same name),
    or moves the row it already has there, then calls ``write(row)`` in the same transaction:
    it creates what the person acts on (an approval, a question) and returns the :class:`Held`
    the run parks with. No step is written: the call's act step is written when it runs, is
    refused, or is answered."""

    status: str
    write: Callable[[ToolCall], Held]


@dataclass(frozen=True, slots=True)
class Refuse:
    """The call does not run: ``{"error": {"code", "message"}}`` is its result for the model,
    recorded with ``status``."""

    code: str
    message: str
    status: str = ToolCallStatus.DENIED


@dataclass(frozen=True, slots=True)
class Answer:
    """The call does not run: ``output`` is its result, recorded with ``status`` as if its
    handler had returned it (evals' experiments answer calls from a recorded run)."""

    output: dict[str, Any]
    status: str = ToolCallStatus.COMPLETED


@dataclass(frozen=True, slots=True)
class Proceed:
    """The call may run, and ``note`` says why (it rides on the outcome's ``notes`` for the run
    plugins: a risk rule that matched and let the call run is flow's decision point)."""

    note: object


@dataclass(frozen=True, slots=True)
class Decision:
    """A person's decision on a call a gate held, found when the run resumes: the call runs now
    (once), with ``arguments`` when the person edited them, unless ``refusal`` says why not
    (then ``after_decision`` is not asked)."""

    refusal: Refuse | None = None
    arguments: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Settled:
    """A held call's result, given by a person (an answer): recorded as the call's own."""

    output: dict[str, Any]
    status: str


type Resumed = Decision | Settled | Held


class ToolGate:
    """Base class of a tool gate: override the hooks you need (see the module's docstring)."""

    def resumed(self, request: CallRequest, existing: ToolCall) -> Resumed | None:
        """A call left waiting for a person (``existing``: its row), in the resumed run."""
        return None

    def before_handler(
        self, request: CallRequest, policy: ToolPolicy
    ) -> Park | Refuse | Answer | Proceed | None:
        """A call about to run for the first time."""
        return None

    def after_decision(self, request: CallRequest, decision: Decision) -> Refuse | None:
        """A call a person decided, about to run: may it still?"""
        return None

    def after_handler(
        self, request: CallRequest, policy: ToolPolicy, outcome: ToolOutcome
    ) -> Park | None:
        """The handler ran and returned ``outcome`` (not recorded yet)."""
        return None


HOOKS = ("resumed", "before_handler", "after_decision", "after_handler")


@dataclass(frozen=True, slots=True)
class Gates:
    """The gate list, loaded once: per hook, the bound methods of the gates that override it
    (empty: the executor does nothing there)."""

    resumed: tuple[Callable[[CallRequest, ToolCall], Resumed | None], ...]
    before_handler: tuple[
        Callable[[CallRequest, ToolPolicy], Park | Refuse | Answer | Proceed | None], ...
    ]
    after_decision: tuple[Callable[[CallRequest, Decision], Refuse | None], ...]
    after_handler: tuple[Callable[[CallRequest, ToolPolicy, ToolOutcome], Park | None], ...]


def gates() -> Gates:
    """The gates of ``settings.AGENTDESK_TOOL_GATES`` (loaded once per list)."""
    return _load(tuple(settings.AGENTDESK_TOOL_GATES))


@functools.cache
def _load(paths: tuple[str, ...]) -> Gates:
    instances: list[ToolGate] = []
    for path in paths:
        cls = import_string(path)
        if not (isinstance(cls, type) and issubclass(cls, ToolGate)):
            raise TypeError(f"AGENTDESK_TOOL_GATES: {cls!r} is not a ToolGate subclass")
        instances.append(cls())
    return Gates(
        *(
            tuple(getattr(gate, name) for gate in instances if _overrides(type(gate), name))
            for name in HOOKS
        )
    )


def _overrides(cls: type[ToolGate], name: str) -> bool:
    return getattr(cls, name) is not getattr(ToolGate, name)
