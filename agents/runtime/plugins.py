"""The runtime's port for features (docs/decisions/0009-runtime-plugins.md): the kernel
(claim, the step transaction, think/act/budget) imports no feature app; flow analysis,
delegation, memory recall and self-correction plug in here, as Django middleware does.

A plugin is a :class:`RunPlugin` subclass named in ``settings.AGENTDESK_RUN_PLUGINS`` (dotted
paths, in order). It overrides only the hooks it needs; which class overrides which hook is
resolved once, when the list is loaded, so a hook nobody overrides costs a run nothing. One
plugin object is made per delivery of a run (:meth:`RunPlugin.for_run`, which may decline the
run), holding what it tracks for that delivery. Hooks, in the order a run meets them:

=====================  ==========================================================================
``version``            first claim of a run created on no chosen version (classmethod): the
                       agent version it starts on instead of the current one (a canary's); the
                       first class to name one wins
``setup``              first claim, before the system prompt is rendered (classmethod): narrow the
                       tools, add recalled memories, past runs, a conversation (:class:`RunSetup`)
``snapshot``           first claim, the snapshot built (classmethod): edit the prompt or limits
``started``            each delivery, before its first model call
``before_step``        before each step's model call (not a summary's): may ask the kernel for a
                       model call of the plugin's own first (:class:`Consult`: an understanding
                       of the request), paid as any, whose reply may return a verdict
``before_model_call``  before each model call (a history summary's too): may :class:`Finish`
``reply_persisted``    inside the reply's one statement (decision 0003): add rows only, no query
``reply_checked``      a reply with tool calls, persisted, before they run: may return a verdict
``tool_settled``       inside the call's step transaction, the executor done: may return a
                       verdict (the call's step is then not written: it runs again on resume)
``tool_result``        inside the same transaction: the result as the model will see it
``after_tool_step``    the call's step committed: may return a verdict
``parked``             the run parked (any reason), its transaction committed
``cancel_reason``      a cancel is being applied: the first (stop reason, error) returned wins
=====================  ==========================================================================

A verdict (:class:`Park` or :class:`Finish`) is applied by the kernel with its own store, in
one transaction (the step's own inside ``tool_settled``); the first verdict returned for a hook
wins and the plugins after it are not asked. A run whose cancel came first is cancelled instead.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self

from django.conf import settings
from django.utils.module_loading import import_string

from agents.llm import Completion, Message, ToolCall
from agents.models import Execution
from agents.runtime.hook_types import (
    Consult,
    Consulted,
    Finish,
    ModelCall,
    Park,
    RunSetup,
    StepWriter,
    Verdict,
)
from agents.runtime.run_view import RunView

if TYPE_CHECKING:
    from agents.runtime.context import ConfigSnapshot
    from agents.runtime.store import StepTransaction
    from tools.calls import ToolOutcome

# The port's names, for plugin authors: one import (``from agents.runtime.plugins import ...``).
__all__ = [
    "Consult",
    "Consulted",
    "Finish",
    "ModelCall",
    "Park",
    "Plugins",
    "RunHooks",
    "RunPlugin",
    "RunSetup",
    "RunView",
    "StepWriter",
    "Verdict",
    "apply_in_step",
    "plugins",
]


class RunPlugin:
    """Base class of a run plugin: override the hooks you need (see the module's docstring)."""

    def __init__(self, run: RunView) -> None:
        self.run = run

    @classmethod
    def for_run(cls, run: RunView) -> Self | None:
        """This plugin for one delivery of ``run``, or None to stay out of it."""
        return cls(run)

    @classmethod
    def version(cls, execution: Execution) -> uuid.UUID | None:
        """The id of the version of ``execution.agent`` the run starts on, or None (the agent's
        current version, when no plugin names one). First claim, in the claim's transaction;
        the version must be the agent's (a foreign key on (version, agent) says so)."""
        return None

    @classmethod
    def setup(cls, setup: RunSetup) -> None:
        """First claim, before the prompt is rendered (in the claim's transaction)."""

    @classmethod
    def snapshot(cls, setup: RunSetup, snapshot: ConfigSnapshot) -> None:
        """First claim, the snapshot built: may edit it (in the claim's transaction)."""

    def started(self) -> None:
        """A delivery starts (or resumes) the run."""

    def before_step(self, messages: Sequence[Message]) -> Consult | None:
        """Before each step's model call (``messages``: the conversation so far), off any
        transaction: a model call of the plugin's own to make first, or None."""
        return None

    def before_model_call(self, call: ModelCall) -> Finish | None:
        """Before each model call, off any transaction."""
        return None

    def reply_persisted(
        self, writer: StepWriter, completion: Completion, *, step_id: uuid.UUID
    ) -> None:
        """Inside the reply's one statement: add rows only, make no query."""

    def reply_checked(self, calls: Sequence[ToolCall], messages: list[Message]) -> Verdict | None:
        """A reply's calls, before they run (``messages`` ends with the reply)."""
        return None

    def tool_settled(
        self,
        writer: StepWriter,
        call: ToolCall,
        outcome: ToolOutcome,
        *,
        step_id: uuid.UUID | None,
        resumed: bool,
    ) -> Verdict | None:
        """The executor decided the call, inside its step's transaction."""
        return None

    def tool_result(
        self,
        writer: StepWriter,
        call: ToolCall,
        output: dict[str, Any],
        messages: Sequence[Message],
    ) -> dict[str, Any]:
        """The call's result as the model will see it (``messages``: before it)."""
        return output

    def after_tool_step(self, call: ToolCall, *, failed: bool) -> Verdict | None:
        """The call's step committed (``failed``: it ran and failed)."""
        return None

    def parked(self, status: str) -> None:
        """The run parked with ``status``; its transaction committed."""

    def cancel_reason(self) -> tuple[str, str] | None:
        """(stop reason, error) of the cancel being applied, or None for the next plugin's."""
        return None


# The per-delivery hooks, in the order a run meets them.
RUN_HOOKS = (
    "started",
    "before_step",
    "before_model_call",
    "reply_persisted",
    "reply_checked",
    "tool_settled",
    "tool_result",
    "after_tool_step",
    "parked",
    "cancel_reason",
)
SETUP_HOOKS = ("version", "setup", "snapshot")


def _overrides(cls: type[RunPlugin], name: str) -> bool:
    mine = inspect_attr(cls, name)
    return mine is not inspect_attr(RunPlugin, name)


def inspect_attr(cls: type, name: str) -> Any:
    """The function behind ``cls.name`` (a classmethod's too), looked up along the MRO."""
    for klass in cls.__mro__:
        if name in klass.__dict__:
            value = klass.__dict__[name]
            return getattr(value, "__func__", value)
    return None


@dataclass(frozen=True, slots=True)
class Plugins:
    """The plugin list, loaded once: per hook, the classes that override it."""

    classes: tuple[type[RunPlugin], ...]
    hooks: Mapping[str, tuple[type[RunPlugin], ...]]
    # The classes with at least one per-delivery hook: the others are never instantiated.
    per_run: tuple[type[RunPlugin], ...]

    def version(self, execution: Execution) -> uuid.UUID | None:
        for cls in self.hooks["version"]:
            if (chosen := cls.version(execution)) is not None:
                return chosen
        return None

    def setup(self, setup: RunSetup) -> None:
        for cls in self.hooks["setup"]:
            cls.setup(setup)

    def snapshot(self, setup: RunSetup, snapshot: ConfigSnapshot) -> None:
        for cls in self.hooks["snapshot"]:
            cls.snapshot(setup, snapshot)

    def for_run(self, run: RunView) -> RunHooks:
        plugins = [p for cls in self.per_run if (p := cls.for_run(run)) is not None]
        return RunHooks(
            *(
                tuple(getattr(p, name) for p in plugins if type(p) in self.hooks[name])
                for name in RUN_HOOKS
            )
        )


@dataclass(frozen=True, slots=True)
class RunHooks:
    """One delivery's hooks: the bound methods of its plugins, per hook (empty: nothing runs)."""

    started: tuple[Callable[[], None], ...]
    before_step: tuple[Callable[[Sequence[Message]], Consult | None], ...]
    before_model_call: tuple[Callable[[ModelCall], Finish | None], ...]
    reply_persisted: tuple[Callable[..., None], ...]
    reply_checked: tuple[Callable[[Sequence[ToolCall], list[Message]], Verdict | None], ...]
    tool_settled: tuple[Callable[..., Verdict | None], ...]
    tool_result: tuple[Callable[..., dict[str, Any]], ...]
    after_tool_step: tuple[Callable[..., Verdict | None], ...]
    parked: tuple[Callable[[str], None], ...]
    cancel_reason: tuple[Callable[[], tuple[str, str] | None], ...]


def plugins() -> Plugins:
    """The plugins of ``settings.AGENTDESK_RUN_PLUGINS`` (loaded once per list)."""
    return _load(tuple(settings.AGENTDESK_RUN_PLUGINS))


@functools.cache
def _load(paths: tuple[str, ...]) -> Plugins:
    classes = tuple(import_string(path) for path in paths)
    for cls in classes:
        if not (isinstance(cls, type) and issubclass(cls, RunPlugin)):
            raise TypeError(f"AGENTDESK_RUN_PLUGINS: {cls!r} is not a RunPlugin subclass")
    hooks = {
        name: tuple(cls for cls in classes if _overrides(cls, name))
        for name in (*SETUP_HOOKS, *RUN_HOOKS)
    }
    per_run = tuple(cls for cls in classes if any(cls in hooks[name] for name in RUN_HOOKS))
    return Plugins(classes, hooks, per_run)


def apply_in_step(tx: StepTransaction, verdict: Verdict) -> str:
    """Record ``verdict`` with the step transaction ``tx``; returns the run's status."""
    if isinstance(verdict, Park):
        given = verdict.input_request
        tx.park(
            verdict.status,
            reason=verdict.reason,
            wait_until=verdict.wait_until,
            input_request=dict(given) if given is not None else None,
        )
        if verdict.write is not None and (request := verdict.write(tx)) is not None:
            tx.execution.input_request = dict(request)  # (a column the park writes)
        return verdict.status
    if verdict.write is not None:
        verdict.write(tx)
    tx.finish(
        verdict.status,
        stop_reason=verdict.stop_reason,
        error=verdict.error,
        error_details=verdict.error_details,
    )
    return verdict.status
