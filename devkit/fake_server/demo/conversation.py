"""Reading a request the way the demo model needs it: the instruction, the tool calls made so
far with their results (every wire format), and the names and addresses the instruction holds."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from devkit.fake_server.script import RecordedRequest

EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_UUID = r"(?P<id>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"
UUID = re.compile(rf"\b{_UUID}\b", re.I)
CONTACT_ID = re.compile(rf"contact_id\W+{_UUID}", re.I)  # an event's payload names its contact
_CAPITALISED = re.compile(r"\b[A-Z][\w'\-]+")
# Capitalised words that start a request rather than name someone.
_REQUEST_WORDS = """
    A About Add After An And Any Ask At Book Call Can Check Contact Could Create Draft Email
    Find Follow For From Get Give Hello Hi How I I'm If In Is It Let Log Look Make Me My Note
    Now Of On Our Please Prepare Qualify Reach Remind Research Review Run Schedule Score Send
    Show Task Tell Thanks That The Their Then There This To Today Tomorrow Update We What When
    Who Why With Would Write You Your CRM AI Demo Monday Tuesday Wednesday Thursday Friday
    Saturday Sunday
"""
_NOT_NAMES = frozenset(_REQUEST_WORDS.split())


@dataclass(frozen=True, slots=True)
class Call:
    """A tool call of an earlier reply and what came back (parsed JSON; None: no result yet)."""

    name: str
    arguments: Mapping[str, Any]
    output: Any = None

    @property
    def failed(self) -> bool:
        return not isinstance(self.output, dict) or "error" in self.output


def _parse(content: Any) -> Any:
    if isinstance(content, list):  # Anthropic: a tool_result's content may be text blocks
        content = "".join(b.get("text", "") for b in content if isinstance(b, dict))
    if not isinstance(content, str):
        return content
    try:
        return json.loads(content)
    except ValueError:
        return content


def _arguments(raw: Any) -> dict[str, Any]:
    value = _parse(raw)
    return dict(value) if isinstance(value, dict) else {}


def past_calls(request: RecordedRequest) -> list[Call]:
    """Every tool call of the conversation, in order, with its result."""
    messages = request.messages
    calls: list[tuple[str, str, dict[str, Any]]] = []  # (id, name, arguments)
    results: dict[str, Any] = {}
    for message in messages:
        role, content = message.get("role"), message.get("content")
        if request.wire == "google":
            _google_calls(message, calls, results)
            continue
        if request.wire == "openai":
            if role == "tool":
                results[str(message.get("tool_call_id"))] = _parse(content)
            for call in message.get("tool_calls") or [] if role == "assistant" else []:
                function = call.get("function") or {}
                calls.append(
                    (
                        str(call.get("id")),
                        function.get("name", ""),
                        _arguments(function.get("arguments")),
                    )
                )
            continue
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use":
                calls.append(
                    (str(block.get("id")), block.get("name", ""), _arguments(block.get("input")))
                )
            elif block.get("type") == "tool_result":
                results[str(block.get("tool_use_id"))] = _parse(block.get("content"))
    return [Call(name, arguments, results.get(call_id)) for call_id, name, arguments in calls]


def _google_calls(
    content: dict[str, Any],
    calls: list[tuple[str, str, dict[str, Any]]],
    results: dict[str, Any],
) -> None:
    """A Gemini turn's functionCall / functionResponse parts (the gateway gives ids; a call
    without one is paired with the response of its name)."""
    for part in content.get("parts") or []:
        if not isinstance(part, dict):
            continue
        call, response = part.get("functionCall"), part.get("functionResponse")
        if isinstance(call, dict):
            key = str(call.get("id") or call.get("name"))
            calls.append((key, call.get("name", ""), _arguments(call.get("args"))))
        elif isinstance(response, dict):
            key = str(response.get("id") or response.get("name"))
            output = response.get("response")
            if isinstance(output, dict) and "output" in output:
                output = output["output"]
            results[key] = _parse(output)


def instruction(request: RecordedRequest) -> str:
    """What this run was asked (or its trigger, described): the first user message after the
    conversation's last final answer. A run that continues a conversation gets the earlier runs'
    turns (instruction, answer) before its own instruction (memory.episodes), and the user turns
    after its instruction are tool results and what it observed (an answer, a wait that ended)."""
    messages = request.messages
    start = 0
    for index, message in enumerate(messages):
        if _is_final_answer(request.wire, message):
            start = index + 1
    for message in messages[start:]:
        if message.get("role") != "user":
            continue
        if request.wire == "google":  # Gemini's contents: parts, the text ones first
            parts = message.get("parts") or []
            return "".join(str(p["text"]) for p in parts if isinstance(p, dict) and "text" in p)
        content = message.get("content")
        if isinstance(content, str):
            return content
        return "".join(
            b.get("text", "")
            for b in content or []
            if isinstance(b, dict) and b.get("type") == "text"
        )
    return ""


def _is_final_answer(wire: str, message: Mapping[str, Any]) -> bool:
    """Whether ``message`` is a model reply that called no tool (a run's last reply)."""
    if wire == "google":
        parts = message.get("parts") or []
        return message.get("role") == "model" and not any(
            isinstance(p, dict) and "functionCall" in p for p in parts
        )
    if message.get("role") != "assistant":
        return False
    if wire == "openai":
        return not message.get("tool_calls")
    content = message.get("content")
    blocks = content if isinstance(content, list) else []
    return not any(isinstance(b, dict) and b.get("type") == "tool_use" for b in blocks)


def tool_description(request: RecordedRequest, name: str) -> str:
    """The description of the offered tool ``name`` ("" when it is not offered)."""
    tools = request.body.get("tools") or []
    if request.wire == "google":
        tools = [d for tool in tools for d in tool.get("functionDeclarations") or []]
    elif request.wire == "openai":
        tools = [tool.get("function") or {} for tool in tools]
    for tool in tools:
        if isinstance(tool, dict) and tool.get("name") == name:
            return str(tool.get("description") or "")
    return ""


_TEAM_LINE = re.compile(r"^- (?P<slug>[a-z0-9][a-z0-9_-]*): (?P<about>.*)$", re.M)


def team(request: RecordedRequest) -> tuple[tuple[str, str], ...]:
    """The agents ``delegate_to_agent`` may hand work to, as its description lists them
    (teams.runtime): (slug, name and description)."""
    description = tool_description(request, "delegate_to_agent")
    return tuple((m.group("slug"), m.group("about")) for m in _TEAM_LINE.finditer(description))


def name_query(text: str) -> str:
    """The first name in ``text``: up to two adjacent capitalised words that are not request
    words (what a person would type into the CRM's search). A lone capitalised word opening a
    sentence is taken for an ordinary word ("Plan the offsite")."""
    runs: list[list[tuple[str, int, int]]] = []
    for match in _CAPITALISED.finditer(text):
        word = match.group().removesuffix("'s")
        if word in _NOT_NAMES:
            runs.append([])
            continue
        last = runs[-1][-1] if runs and runs[-1] else None
        if last is not None and not text[last[2] : match.start()].strip():
            runs[-1].append((word, match.start(), match.end()))
        else:
            runs.append([(word, match.start(), match.end())])
    for run in runs:
        if not run:
            continue
        opening = not text[: run[0][1]].strip() or text[: run[0][1]].rstrip()[-1] in ".!?:\n"
        if len(run) == 1 and opening:
            continue
        return " ".join(word for word, _, _ in run[:2])
    return ""
