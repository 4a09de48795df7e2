"""Mermaid text for a run (seed 003's visualisations): pure functions from recorded rows
(:mod:`flow.diagrams.records`) to diagram text.

Every label comes from data a model, a tool or a user wrote (tool names, arguments, answers), so
it is made inert before it enters the text: one line, no character Mermaid reads as syntax
(``;`` ends a statement, ``#`` starts an entity, ``%%`` a comment, ``<``/``>``/``&``/``"`` HTML),
each written as Mermaid's entity code instead, and cut to a length that keeps the diagram
readable. Identifiers (participants, states) are generated here, never taken from the data.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Any

from agents.models import ExecutionStatus, MessageType
from flow.diagrams.records import (
    ApprovalRow,
    ChildRunRow,
    FlowRecord,
    MessageRow,
    QuestionRow,
    StepRow,
    TransitionRow,
)

LABEL_CHARS = 60
ARGUMENT_CHARS = 40
# Mermaid's entity codes (``#name;`` or ``#<decimal>;``): shown as the character, parsed as text.
_ENTITIES = {
    "#": "#35;",
    ";": "#59;",
    "%": "#37;",
    "<": "#lt;",
    ">": "#gt;",
    "&": "#amp;",
    '"': "#quot;",
    "{": "#123;",
    "}": "#125;",
    "[": "#91;",
    "]": "#93;",
    "`": "#96;",
    "\\": "#92;",
    "|": "#124;",
}
_SPECIAL = re.compile("[" + re.escape("".join(_ENTITIES)) + "]")
_SPACE = re.compile(r"\s+")
_STATE_ID = re.compile(r"[^a-z0-9_]")
TERMINAL_STATES = frozenset({"completed", "failed", "cancelled", "timed_out"})


def label(value: object, limit: int = LABEL_CHARS) -> str:
    """``value`` as one inert line of at most ``limit`` characters (before escaping)."""
    text = _SPACE.sub(" ", str(value)).strip()
    # Control characters (a NUL, a bidi override) have no place in a label.
    text = "".join(ch for ch in text if ch.isprintable())
    if len(text) > limit:
        text = text[: limit - 1].rstrip() + "…"
    return _SPECIAL.sub(lambda m: _ENTITIES[m.group()], text) or "-"


def arguments_label(arguments: Any) -> str:
    """A tool call's arguments, compact: ``key=value, ...`` cut to :data:`ARGUMENT_CHARS`."""
    if isinstance(arguments, dict):
        text = ", ".join(f"{k}={_json(v)}" for k, v in arguments.items())
    elif arguments in (None, ""):
        text = ""
    else:
        text = _json(arguments)
    return label(text, ARGUMENT_CHARS) if text else ""


def _json(value: Any) -> str:
    return json.dumps(value, default=str, ensure_ascii=False)


def state_id(state: str) -> str:
    cleaned = _STATE_ID.sub("_", state.lower())
    return cleaned or "unknown"


def state_label(state: str) -> str:
    """A run's status as the run page's badge names it (ExecutionStatus's labels: "Waiting for
    approval", not ``waiting_approval``); another word with its underscores as spaces."""
    if state in ExecutionStatus.values:
        return str(ExecutionStatus(state).label)
    return state.replace("_", " ")


# --- the sequence diagram ---------------------------------------------------------------------
class _Participants:
    """Generated ids in order of first appearance: ``A`` the agent, ``M`` the model, ``T1``..
    tools, ``H`` humans, ``X1``.. other agents."""

    def __init__(self, agent_name: str) -> None:
        self.lines = [f"  participant A as {label(agent_name, 40)}"]
        self.ids: dict[tuple[str, str], str] = {}
        self.counts = {"T": 0, "X": 0}

    def model(self) -> str:
        return self._get(("model", ""), "M", "participant", "Model")

    def human(self) -> str:
        return self._get(("human", ""), "H", "actor", "Human")

    def tool(self, name: str) -> str:
        return self._numbered(("tool", name), "T", "participant", name or "unknown tool")

    def agent(self, key: str, name: str) -> str:
        return self._numbered(("agent", key), "X", "participant", name or "another agent")

    def _numbered(self, key: tuple[str, str], prefix: str, kind: str, shown: str) -> str:
        if key in self.ids:
            return self.ids[key]
        self.counts[prefix] += 1
        return self._get(key, f"{prefix}{self.counts[prefix]}", kind, shown)

    def _get(self, key: tuple[str, str], ident: str, kind: str, shown: str) -> str:
        if key not in self.ids:
            self.ids[key] = ident
            self.lines.append(f"  {kind} {ident} as {label(shown, 40)}")
        return self.ids[key]


def _step_lines(step: StepRow, who: _Participants) -> list[str]:
    prefix = f"#35;{step.number} "
    if step.step_type == "observe":
        what = step.input_text or step.trigger or "observed"
        return [f"  Note over A: {prefix}{label(what)}"]
    if step.step_type == "think":
        model = who.model()
        lines = [f"  A->>{model}: {prefix}think"]
        if step.tool_calls:
            names = ", ".join(name for name, _ in step.tool_calls)
            lines.append(f"  {model}-->>A: call {label(names)}")
        else:
            lines.append(f"  {model}-->>A: {label(step.output_text or 'answer')}")
        return lines
    if step.step_type == "act":
        tool = who.tool(step.tool_name)
        args = arguments_label(step.tool_input)
        result = f"error {label(step.error_code, 30)}" if step.error_code is not None else "ok"
        return [f"  A->>{tool}: {prefix}{args or 'call'}", f"  {tool}-->>A: {result}"]
    if step.summary:  # the context window's summary: a model call of its own
        model = who.model()
        return [f"  A->>{model}: {prefix}summarise earlier turns", f"  {model}-->>A: summary"]
    # reflect (self-correction)
    return [f"  Note over A: {prefix}reflect {label(step.output_text or step.reasoning)}"]


def _approval_lines(row: ApprovalRow, who: _Participants, *, decided: bool) -> list[str]:
    human = who.human()
    if not decided:
        return [f"  A->>{human}: approve {label(row.tool_name, 40)}? ({label(row.risk_level)})"]
    reason = f": {label(row.reason, 40)}" if row.reason else ""
    return [f"  {human}-->>A: {label(row.status)}{reason}"]


def _question_lines(row: QuestionRow, who: _Participants, *, answered: bool) -> list[str]:
    human = who.human()
    if not answered:
        return [f"  A->>{human}: {label(row.question)}"]
    return [f"  {human}-->>A: {label(row.answer or row.status)}"]


def _message_lines(row: MessageRow, who: _Participants) -> list[str]:
    other = who.agent(row.agent_key, row.agent_name)
    arrow = "->>" if row.is_request else "-->>"
    kinds = dict(MessageType.choices)
    text = label(kinds.get(row.message_type, row.message_type.replace("_", " ")))
    if row.outgoing:
        return [f"  A{arrow}{other}: {text}"]
    return [f"  {other}{arrow}A: {text}"]


def _child_lines(row: ChildRunRow, who: _Participants) -> list[str]:
    other = who.agent(row.agent_key, row.agent_name)
    status = label(state_label(row.status))
    return [f"  A-){other}: started run ({label(row.trigger_type)}), {status}"]


def sequence_diagram(record: FlowRecord) -> str:
    """The run as a sequence: the agent, the model, each tool, humans, other agents."""
    who = _Participants(record.agent_name)
    who.model()  # always second: every run talks to its model
    events: list[tuple[Any, int, int, Callable[[_Participants], list[str]]]] = []

    def add(at: Any, rank: int, lines_of: Callable[[_Participants], list[str]]) -> None:
        events.append((at, rank, len(events), lines_of))

    for step in record.steps:
        add(step.at, 1, partial(_step_lines, step))
    for a in record.approvals:
        add(a.asked_at, 0, partial(_approval_lines, a, decided=False))
        if a.decided_at is not None:
            add(a.decided_at, 0, partial(_approval_lines, a, decided=True))
    for q in record.questions:
        add(q.asked_at, 0, partial(_question_lines, q, answered=False))
        if q.answered_at is not None:
            add(q.answered_at, 0, partial(_question_lines, q, answered=True))
    for message in record.messages:
        add(message.at, 2, partial(_message_lines, message))
    for child in record.children:
        add(child.at, 2, partial(_child_lines, child))
    body: list[str] = []
    for _, _, _, lines_of in sorted(events, key=lambda e: (e[0], e[1], e[2])):
        body.extend(lines_of(who))
    if record.status:
        body.append(f"  Note over A: {label(state_label(record.status))}")
    return "\n".join(["sequenceDiagram", *who.lines, *body]) + "\n"


# --- the state diagram ------------------------------------------------------------------------
def _transition_label(row: TransitionRow) -> str:
    """What moved the run (``approval_required``), in words: "approval required"."""
    if row.transition_type and row.transition_type != "normal":
        return row.transition_type.replace("_", " ")
    return row.triggered_by.replace("_", " ")


def state_diagram(transitions: Sequence[TransitionRow]) -> str:
    """The run's states in order (StateTransition rows), each named as the run page's badge
    names it; an edge taken more than once is drawn once with its count."""
    lines = ["stateDiagram-v2"]
    edges: dict[tuple[str, str, str], int] = {}
    order: list[tuple[str, str, str]] = []
    states: list[str] = []
    names: dict[str, str] = {}  # a state's id: the status it stands for
    for row in sorted(transitions, key=lambda r: r.sequence):
        to = state_id(row.to_state)
        start = state_id(row.from_state) if row.from_state else "[*]"
        edge = (start, to, label(_transition_label(row), 40) if _transition_label(row) else "")
        if edge not in edges:
            order.append(edge)
            edges[edge] = 0
        edges[edge] += 1
        states.extend(s for s in (start, to) if s != "[*]" and s not in states)
        names.setdefault(to, row.to_state)
        names.setdefault(start, row.from_state)
    # (The ids stay generated: a state's name is a description, inert like every label.)
    lines.extend(f'  state "{label(state_label(names[s]))}" as {s}' for s in states)
    for start, to, text in order:
        count = edges[(start, to, text)]
        shown = text + (f" ({count} times)" if count > 1 else "")
        lines.append(f"  {start} --> {to}" + (f": {shown.strip()}" if shown.strip() else ""))
    lines.extend(f"  {s} --> [*]" for s in _ends(states, transitions))
    return "\n".join(lines) + "\n"


def _ends(states: Iterable[str], transitions: Sequence[TransitionRow]) -> list[str]:
    if not transitions:
        return []
    last = state_id(max(transitions, key=lambda r: r.sequence).to_state)
    return [last] if last in TERMINAL_STATES and last in states else []
