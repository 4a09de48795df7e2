"""Memory plugged into the runtime (agents/runtime/plugins.py): at a run's first claim, what it
recalls (memories, similar past runs, the conversation it continues: memory/recall.py) and the
approaches that worked before (memory/learning/patterns.py); while it runs, a tool result that
looks wrong for the task opens an investigation (memory/learning/investigations.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agents.llm import Message, ToolCall
from agents.runtime.plugins import RunPlugin, RunSetup, RunView, StepWriter
from memory.learning import investigations
from memory.learning import patterns as learned
from memory.learning.models import Investigation
from memory.recall import recall

if TYPE_CHECKING:
    from agents.runtime.context import ConfigSnapshot


class MemoryPlugin(RunPlugin):
    @classmethod
    def setup(cls, setup: RunSetup) -> None:
        found = recall(setup.agent, setup.execution)
        setup.memories = found.memories
        setup.episodes = found.episodes
        setup.conversation = found.conversation
        setup.conversation_key = found.conversation_key

    @classmethod
    def snapshot(cls, setup: RunSetup, snapshot: ConfigSnapshot) -> None:
        snapshot["system_prompt"] = learned.with_patterns(  # approaches that worked before
            snapshot["system_prompt"], setup.agent, setup.execution
        )

    @classmethod
    def for_run(cls, run: RunView) -> MemoryPlugin | None:
        limit = min(int(run.agent.investigation_max_steps or 0), investigations.MAX_GRANTED)
        return cls(run, limit) if limit > 0 else None  # (nothing to look at during the run)

    def __init__(self, run: RunView, limit: int = 0) -> None:
        super().__init__(run)
        self.limit = limit
        self.granted: bool | None = None  # unknown until a result looks wrong (a resumed run)

    def tool_result(
        self,
        writer: StepWriter,
        call: ToolCall,
        output: dict[str, Any],
        messages: Sequence[Message],
    ) -> dict[str, Any]:
        """The tool's result as the model sees it: with a note to investigate, and the extra
        steps granted, the first time in a run that a result looks wrong (agent setting
        ``investigation_max_steps``). No query for a result that looks right. Inside the
        step's transaction: the grant is written with it."""
        trigger = investigations.looks_wrong(output)
        if trigger is None:
            return output
        execution = self.run.execution
        if self.granted is None:  # (a resumed run: asked once)
            self.granted = Investigation.objects.filter(execution_id=execution.pk).exists()
        if self.granted:
            return output
        self.granted = True
        Investigation.objects.create(
            agency_id=execution.agency_id,
            execution_id=execution.pk,
            agent_id=execution.agent_id,
            tool_name=call.name[:200],
            tool_call_id=call.id[:200],
            trigger=trigger,
            tool_result=investigations.clipped(output),
            started_at_step=execution.current_step,
            steps_granted=self.limit,
        )
        self.run.grant_steps(writer, self.limit)
        return {**output, investigations.NOTE_KEY: investigations.note(trigger, self.limit)}
