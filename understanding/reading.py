"""The understanding of a request (seed 000, "Understanding Phase (Deep)"): what the model is
asked before the agent acts, and its reply read into an :class:`Understanding` (decomposition,
entity-to-field mappings with a confidence each, ambiguities). A reply that is no such JSON is
an understanding of nothing, with every confidence 0."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agents.llm import Message
from agents.runtime.context import ConfigSnapshot
from understanding.confidence import COMPONENTS, clip

# The opening of the understanding's system prompt (the demo model knows a request by it).
OPENING = "You read a request made to an AI agent and say how you understand it"
PROMPT = (
    OPENING
    + """, before the agent acts on it. Do not answer or carry out the request.

Reply with one JSON object only, with these keys:
- "intent": what the person wants, in a few words;
- "operation": lookup, list, count, aggregate, top_n, compare, trend, create, update, send or
  other;
- "entities": {"<role: target, metric, filter...>": "<the request's words>"};
- "time_filter": {"type": "quarter, month, year, range or relative", "value": "...",
  "year": 2024}, or null;
- "summary": the request restated in one sentence;
- "entity_confidence": 0 to 1, how sure you are you found every entity the request names;
- "pattern_confidence": 0 to 1, how sure you are of the operation;
- "mappings": [{"entity": "...", "field": "<a real field, column or tool argument>",
  "confidence": 0 to 1}];
- "ambiguities": [{"type": "dataset_choice, column_ambiguity, filter_value, operation_type or
  missing_info", "entity": "...", "question": "the question to ask the person",
  "candidates": ["..."]}].

Map each entity to a real field of the data the agent can reach: its tools' parameters, the
datasets and fields its instructions name. List an ambiguity only when the request could mean
different things and the answer changes what the agent does, with the candidates when you can
name them. A person's answers to earlier questions are part of the request."""
)
# Seed 000's clarification types; a model's other type is asked as missing information.
QUESTION_TYPES = (
    "dataset_choice",
    "column_ambiguity",
    "filter_value",
    "operation_type",
    "missing_info",
)
INSTRUCTIONS_CHARS = 4000
PARAMETERS_CHARS = 600
TEXT_CHARS = 500  # a field of the reply, as recorded
MAX_ITEMS = 20  # mappings, ambiguities, candidates kept


@dataclass(frozen=True, slots=True)
class Ambiguity:
    type: str
    entity: str
    question: str
    candidates: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Understanding:
    decomposition: dict[str, Any]  # intent, operation, entities, time_filter
    summary: str
    entity_confidence: float
    pattern_confidence: float
    mappings: tuple[dict[str, Any], ...]  # {"entity", "field", "confidence"}
    ambiguities: tuple[Ambiguity, ...]
    readable: bool = True

    def scores(self) -> dict[str, float]:
        """The formula's components (understanding.confidence); all 0 for an unreadable reply."""
        if not self.readable:
            return dict.fromkeys(COMPONENTS, 0.0)
        mapped = [float(m["confidence"]) for m in self.mappings]
        return {
            "entity_extraction": self.entity_confidence,
            "schema_mapping": round(sum(mapped) / len(mapped), 4) if mapped else 1.0,
            "pattern_match": self.pattern_confidence,
            "no_ambiguities": 0.0 if self.ambiguities else 1.0,
        }

    def as_record(self) -> dict[str, Any]:
        return {
            "decomposition": self.decomposition,
            "summary": self.summary,
            "mappings": list(self.mappings),
            "ambiguities": [
                {
                    "type": a.type,
                    "entity": a.entity,
                    "question": a.question,
                    "candidates": list(a.candidates),
                }
                for a in self.ambiguities
            ],
            "readable": self.readable,
        }


def request_messages(
    snapshot: ConfigSnapshot, instruction: str, conversation: Sequence[Message]
) -> list[Message]:
    """What the model is asked: the agent's instructions and tools, the request, and what was
    said since (a person's answers). ``conversation``: the run's messages so far."""
    earlier = len(snapshot.get("conversation") or [])
    since = [m.content for m in conversation[earlier + 2 :] if m.role == "user" and m.content]
    tools = "\n".join(
        f"- {t['name']}: {t['description']} (parameters: "
        f"{json.dumps(t['parameters'], sort_keys=True)[:PARAMETERS_CHARS]})"
        for t in snapshot["tools"]
    )
    parts = [
        "The agent's instructions:\n" + snapshot["system_prompt"][:INSTRUCTIONS_CHARS],
        "Its tools:\n" + (tools or "(none)"),
        "The request:\n" + instruction,
    ]
    if since:
        parts.append("Said since:\n" + "\n".join(f"- {text}" for text in since))
    return [Message.system(PROMPT), Message.user("\n\n".join(parts))]


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def _json_object(text: str) -> dict[str, Any] | None:
    candidates = [text.strip(), *(m.group(1).strip() for m in _FENCE.finditer(text))]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def _list(value: object) -> list[Any]:
    return value[:MAX_ITEMS] if isinstance(value, list) else []


def _text(value: object) -> str:
    return value.strip()[:TEXT_CHARS] if isinstance(value, str) else ""


def _ambiguity(item: Mapping[str, Any]) -> Ambiguity:
    kind = _text(item.get("type"))
    candidates = _list(item.get("candidates"))
    return Ambiguity(
        type=kind if kind in QUESTION_TYPES else "missing_info",
        entity=_text(item.get("entity")),
        question=_text(item.get("question")),
        candidates=tuple(dict.fromkeys(str(c).strip()[:200] for c in candidates if str(c).strip())),
    )


def parse(text: str) -> Understanding:
    """The model's reply read; fields of the wrong type are left out, confidences clipped."""
    data = _json_object(text)
    if data is None:
        return Understanding(
            decomposition={},
            summary="",
            entity_confidence=0.0,
            pattern_confidence=0.0,
            mappings=(),
            ambiguities=(
                Ambiguity("missing_info", "", "", ()),  # asked as "what do you mean?"
            ),
            readable=False,
        )
    entities = data.get("entities")
    time_filter = data.get("time_filter")
    return Understanding(
        decomposition={
            "intent": _text(data.get("intent")),
            "operation": _text(data.get("operation")),
            "entities": entities if isinstance(entities, dict) else {},
            "time_filter": time_filter if isinstance(time_filter, dict) else None,
        },
        summary=_text(data.get("summary")),
        entity_confidence=clip(data.get("entity_confidence")),
        pattern_confidence=clip(data.get("pattern_confidence")),
        mappings=tuple(
            {
                "entity": _text(m.get("entity")),
                "field": _text(m.get("field") or m.get("column")),
                "confidence": clip(m.get("confidence")),
            }
            for m in _list(data.get("mappings"))
            if isinstance(m, dict)
        ),
        ambiguities=tuple(
            _ambiguity(a) for a in _list(data.get("ambiguities")) if isinstance(a, dict)
        ),
    )
