"""The run as plugins see it (:class:`RunView`), over what the loop's run gives it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol, cast

from agents.models import Agent, Execution

if TYPE_CHECKING:
    from agents.runtime.context import ConfigSnapshot
    from agents.runtime.hook_types import StepWriter
    from agents.runtime.store import StepTransaction
    from tools.policy import ToolPolicy


class _Kernel(Protocol):
    """What the loop's run gives its view (agents/runtime/loop.py)."""

    @property
    def execution(self) -> Execution: ...

    @property
    def agent(self) -> Agent: ...

    @property
    def worker(self) -> str: ...

    @property
    def first_claim(self) -> bool: ...

    @property
    def snapshot(self) -> ConfigSnapshot: ...

    @property
    def tools(self) -> Mapping[str, ToolPolicy]: ...

    def settle(self) -> None: ...

    def cancel_requested(self) -> bool: ...


class RunView:
    """The run as plugins see it: read its execution, agent and snapshot; write only through
    the hooks' :class:`StepWriter` and verdicts."""

    __slots__ = ("_run", "tool_names")

    def __init__(self, run: _Kernel) -> None:
        self._run = run
        self.tool_names: list[str] = sorted(run.tools)  # what the model may choose from

    @property
    def execution(self) -> Execution:
        return self._run.execution

    @property
    def agent(self) -> Agent:
        """The agent as the run's version configured it."""
        return self._run.agent

    @property
    def snapshot(self) -> ConfigSnapshot:
        return self._run.snapshot

    @property
    def worker(self) -> str:
        return self._run.worker

    @property
    def first_claim(self) -> bool:
        """This delivery started the run (else it resumes it)."""
        return self._run.first_claim

    def settle(self) -> None:
        """Collect the last step's commit if still in flight: call it before a query made
        outside a hook's transaction."""
        self._run.settle()

    def cancel_requested(self) -> bool:
        return self._run.cancel_requested()

    def grant_steps(self, writer: StepWriter, steps: int) -> None:
        """``steps`` more model calls for this run, written with ``writer``'s step (kept by a
        resumed run: the snapshot's ``max_steps_per_run``)."""
        snapshot = self._run.snapshot
        snapshot["max_steps_per_run"] = int(snapshot["max_steps_per_run"]) + steps
        cast("StepTransaction", writer).changed.add("config_snapshot")
