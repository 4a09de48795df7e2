"""Context assembly: the config snapshot a run keeps, the system prompt (seed 004's
``buildSystemPrompt``), and the message list rebuilt from persisted steps on resume."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict

from agents.llm import Message, MessageDict, ToolCall, ToolDefinition
from agents.models import Agent, Execution, ExecutionStep, StepType, TriggerType
from tools.policy import ToolPolicy

RESPONSE_GUIDELINES = (
    "## Response Guidelines\n"
    "- Think step by step before taking action\n"
    "- Use tools when needed to gather information or take action\n"
    "- Be concise but thorough\n"
    "- Always explain your reasoning\n"
    "- If unsure, ask for clarification rather than guessing\n"
)


class ConfigSnapshot(TypedDict):
    """What a run started with: a resume after the agent was edited behaves the same."""

    agent_name: str
    system_prompt: str  # rendered: personality, prompt, goals, tools, memories, constraints
    tools: list[ToolPolicy]
    llm_provider: str
    llm_model: str
    temperature: float
    max_tokens: int
    max_steps_per_run: int
    max_tool_calls_per_step: int
    timeout_seconds: int
    memories: NotRequired[list[str]]
    # Issue 17: similar past runs recalled (in the system prompt with the memories), the
    # recent conversation the run continues (sent before its instruction), and the history
    # budget of each model call (0 or absent, as in runs started before: the whole history).
    episodes: NotRequired[list[str]]
    conversation: NotRequired[list[MessageDict]]
    conversation_key: NotRequired[dict[str, str]]
    context_token_budget: NotRequired[int]
    # Issue 19: a delegated run's limits from the run that delegated to it (teams/runtime.py).
    delegation: NotRequired[dict[str, Any]]
    # The agent's declared inputs' names (agents/inputs.py): a manual run's model is given those
    # of its data after its instruction. Absent (runs started before, none declared): none.
    inputs: NotRequired[list[str]]


def build_system_prompt(
    agent: Agent,
    *,
    goals: list[tuple[str, str]],
    tool_names: list[str],
    memories: list[str],
    episodes: Sequence[str] = (),
) -> str:
    """Seed 004's buildSystemPrompt: personality, prompt, goals, capabilities, memory,
    constraints, guidelines. Empty sections are left out rather than printed as headings."""
    parts = [agent.personality.strip(), agent.system_prompt.strip()]
    if goals:
        lines = [f"{i}. {name}: {description}" for i, (name, description) in enumerate(goals, 1)]
        parts.append("## Your Goals (in priority order)\n" + "\n".join(lines))
    if tool_names:
        parts.append(
            "## Your Capabilities\nYou have access to the following tools:\n"
            + "\n".join(f"- {name}" for name in tool_names)
        )
    if memories:
        parts.append("## Relevant Context from Memory\n" + "\n".join(f"- {m}" for m in memories))
    if episodes:
        parts.append(
            "## Similar Past Situations\nHow your earlier runs like this one went:\n"
            + "\n".join(f"- {e}" for e in episodes)
        )
    constraints = [_constraint_text(c) for c in agent.constraints or []]
    if constraints:
        parts.append("## Constraints\n" + "\n".join(f"- {c}" for c in constraints if c))
    examples = agent.examples or []
    if examples:
        parts.append("## Examples\n" + "\n".join(f"- {json.dumps(e)}" for e in examples))
    parts.append(RESPONSE_GUIDELINES)
    return "\n\n".join(p for p in parts if p)


def _constraint_text(constraint: object) -> str:
    if isinstance(constraint, str):
        return constraint
    if isinstance(constraint, dict):
        text = constraint.get("description") or constraint.get("rule") or constraint.get("text")
        return str(text) if text else json.dumps(constraint)
    return str(constraint)


def tool_definitions(snapshot: ConfigSnapshot) -> list[ToolDefinition]:
    return [
        ToolDefinition(name=t["name"], description=t["description"], parameters=t["parameters"])
        for t in snapshot["tools"]
    ]


def initial_messages(snapshot: ConfigSnapshot, execution: Execution) -> list[Message]:
    """The run's head: system prompt, the recent conversation it continues, its instruction."""
    earlier = [Message.from_dict(m) for m in snapshot.get("conversation") or []]
    return [
        Message.system(snapshot["system_prompt"]),
        *earlier,
        Message.user(_instruction(snapshot, execution)),
    ]


def _instruction(snapshot: ConfigSnapshot, execution: Execution) -> str:
    """The run's first user message, and a manual run's declared inputs after its instruction
    (without one, the trigger's description already shows all its data)."""
    text = execution.first_user_message()
    data = execution.trigger_data if isinstance(execution.trigger_data, dict) else {}
    given = {name: data[name] for name in snapshot.get("inputs") or () if name in data}
    if not (given and execution.input and execution.trigger_type == TriggerType.MANUAL):
        return text
    return f"{text}\n\nInputs:\n{json.dumps(given, default=str, indent=1)}"


def think_payload(message: Message, **extra: Any) -> dict[str, Any]:
    """The persisted form of a model reply (``ExecutionStep.llm_response``)."""
    return {"message": message.to_dict(), **extra}


def tool_result_message(tool_call_id: str, output: dict[str, Any]) -> Message:
    return Message.tool_result(
        tool_call_id, json.dumps(output, default=str), is_error="error" in output
    )


@dataclass(frozen=True, slots=True)
class Resumed:
    """A resumed run's conversation, rebuilt from its persisted steps."""

    messages: list[Message]
    # The last model reply's tool calls without a recorded result: they still have to run.
    pending: list[ToolCall]
    # What the run observed while those were outstanding (a wait that ended, an answer): it goes
    # after their results, since both wire formats want all of a reply's results right after it
    # (OpenAI: its tool messages; Anthropic: a user turn's tool_result blocks before its text).
    observed: list[Message]


def rebuild_messages(
    snapshot: ConfigSnapshot, execution: Execution, steps: list[ExecutionStep]
) -> Resumed:
    """The conversation so far, from persisted steps, and the tool calls of the last model reply
    that have no recorded result yet (they still have to run).

    A reply is followed by the results of all its tool calls, then by what the run observed
    while they ran (a wait that ended, an answer), in that order, whatever the steps' order.
    """
    messages = initial_messages(snapshot, execution)
    answered: set[str] = set()
    last_calls: list[ToolCall] = []
    unanswered: set[str] = set()  # the last reply's calls without a result so far
    held: list[Message] = []  # observations waiting for those results
    for step in steps:
        if step.step_type == StepType.THINK and step.llm_response:
            reply = Message.from_dict(step.llm_response["message"])
            messages += held
            held = []
            messages.append(reply)
            last_calls = list(reply.tool_calls)
            unanswered = {call.id for call in last_calls}
        elif step.step_type == StepType.ACT and step.tool_call_id:
            messages.append(tool_result_message(step.tool_call_id, step.tool_output or {}))
            answered.add(step.tool_call_id)
            unanswered.discard(step.tool_call_id)
            if not unanswered:
                messages += held
                held = []
        elif step.step_type == StepType.OBSERVE and step.step_number > 1 and step.input_text:
            # An answered clarification or a resumed wait: the agent observes it as user input.
            (held if unanswered else messages).append(Message.user(step.input_text))
    pending = [call for call in last_calls if call.id not in answered]
    return Resumed(messages, pending, held)


def last_calls_failed(messages: list[Message]) -> list[dict[str, Any]]:
    """The failed calls of the last reply that called tools, when the model answers after it
    (a final answer that follows failures is marked so in the run's result, not passed off as
    a clean completion): tool name, error code and message."""
    failed: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    for message in reversed(messages):
        if message.role == "tool":
            if message.is_error:
                failed.append({"tool_call_id": message.tool_call_id, **_error_of(message)})
        elif message.tool_calls:
            names = {call.id: call.name for call in message.tool_calls}
            break
        elif message.role == "assistant":
            break
    for entry in failed:
        entry["tool"] = names.get(entry.pop("tool_call_id") or "", "")
    return list(reversed(failed))


def _error_of(message: Message) -> dict[str, Any]:
    try:
        error = json.loads(message.content).get("error") or {}
    except (ValueError, AttributeError):
        error = {}
    return {"code": str(error.get("code", "")), "message": str(error.get("message", ""))[:500]}
