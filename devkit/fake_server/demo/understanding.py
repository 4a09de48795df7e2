"""The demo model's understanding of a request, for agents that understand before they act
(understanding/, README "Understanding phase"): a JSON understanding as the platform asks for
it. A request that leaves its measure or its period open ("our best customers", "recent
deals") is understood with a low confidence and an ambiguity with candidates, so the run asks a
person first; a clear request, or one a person has answered about, with a high confidence."""

from __future__ import annotations

import json
import re
from typing import Any

from devkit.fake_server.script import RecordedRequest

# The understanding's system prompt opens so (understanding.reading.OPENING).
OPENING = "You read a request made to an AI agent and say how you understand it"

# A word that leaves the request open: (seed type, question, candidates).
VAGUE: dict[str, tuple[str, str, list[str]]] = {
    "best": (
        "column_ambiguity",
        "By 'best', do you mean the highest lead score, the most deals won, or the largest "
        "deal value?",
        ["lead score", "deals won", "deal value"],
    ),
    "top": (
        "column_ambiguity",
        "Top by what: lead score, deals won, or deal value?",
        ["lead score", "deals won", "deal value"],
    ),
    "sales": (
        "column_ambiguity",
        "By 'sales', do you mean the deal value or the number of deals?",
        ["deal value", "number of deals"],
    ),
    "recent": (
        "filter_value",
        "What time period should I include?",
        ["last 7 days", "last 30 days", "this quarter"],
    ),
}
_OPERATIONS = (
    ("how many", "count"),
    ("count", "count"),
    ("top", "top_n"),
    ("best", "top_n"),
    ("total", "aggregate"),
    ("list", "list"),
    ("show", "list"),
    ("send", "send"),
    ("create", "create"),
)
_PARAMETER = re.compile(r'"properties": \{"(\w+)"')


def _section(text: str, title: str) -> str:
    _, found, rest = text.partition(f"{title}:\n")
    return rest.split("\n\n", 1)[0].strip() if found else ""


def understand(request: RecordedRequest) -> str | None:
    """The understanding as JSON text, or None when ``request`` asks for none."""
    if not (request.system or "").startswith(OPENING):
        return None
    asked = request.last_user_text
    text = _section(asked, "The request")
    answered = _section(asked, "Said since")
    lowered = text.lower()
    words = set(re.findall(r"[a-z]+", lowered))
    operation = next((op for key, op in _OPERATIONS if key in lowered), "lookup")
    field = next(iter(_PARAMETER.findall(_section(asked, "Its tools"))), "query")
    vague = [word for word in VAGUE if word in words]
    understanding: dict[str, Any] = {
        "intent": f"{operation} over the agency's data",
        "operation": operation,
        "entities": {"request": text[:120]},
        "time_filter": None,
        "summary": f"(demo model: scripted, no AI) The person asks: {text[:200]}",
    }
    if vague and not answered:
        word = vague[0]
        kind, question, candidates = VAGUE[word]
        understanding |= {
            "entity_confidence": 0.6,
            "pattern_confidence": 0.5,
            "mappings": [{"entity": word, "field": field, "confidence": 0.4}],
            "ambiguities": [
                {"type": kind, "entity": word, "question": question, "candidates": candidates}
            ],
        }
    else:
        if answered:
            understanding["summary"] += f" ({answered.removeprefix('- ')[:200]})"
        understanding |= {
            "entity_confidence": 0.9,
            "pattern_confidence": 0.85,
            "mappings": [{"entity": text.split(" ")[0][:40], "field": field, "confidence": 0.9}],
            "ambiguities": [],
        }
    return json.dumps(understanding)
