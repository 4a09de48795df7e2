"""The understanding's confidence (seed 000's formula, weights from a setting), the model's reply
read into an understanding, its clarification question, and the demo model's part."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from agents.llm import Message
from devkit.fake_server.demo.understanding import understand
from devkit.fake_server.script import RecordedRequest
from understanding import clarify, confidence, reading

# Seed 000's example, with its ambiguity ("sales": amount, revenue or total).
SEED_REPLY: dict[str, Any] = {
    "intent": "aggregation_with_ranking",
    "operation": "TOP_N",
    "entities": {"target": "customers", "metric": "total sales", "n": 5},
    "time_filter": {"type": "quarter", "value": "Q4", "year": 2024},
    "summary": "The 5 customers with the highest total sales in Q4 2024.",
    "entity_confidence": 0.9,
    "pattern_confidence": 0.8,
    "mappings": [
        {"entity": "customers", "column": "customer_name", "confidence": 0.95},
        {"entity": "total sales", "column": "amount", "confidence": 0.88},
        {"entity": "date", "column": "order_date", "confidence": 0.92},
    ],
    "ambiguities": [
        {"type": "column_ambiguity", "entity": "sales", "candidates": ["amount", "revenue"]}
    ],
}


def test_the_seeds_formula_with_its_weights() -> None:
    understood = reading.parse(json.dumps(SEED_REPLY))
    scores = understood.scores()

    assert scores == {
        "entity_extraction": 0.9,
        "schema_mapping": 0.9167,  # (0.95 + 0.88 + 0.92) / 3
        "pattern_match": 0.8,
        "no_ambiguities": 0.0,
    }
    # 0.9 * 0.3 + 0.9167 * 0.3 + 0.8 * 0.2 + 0 * 0.2 = 0.705
    assert confidence.overall(scores, confidence.weights()) == 0.71
    without = {**scores, "no_ambiguities": 1.0}
    assert confidence.overall(without, confidence.weights()) == 0.91


def test_the_weights_are_a_setting_divided_by_their_sum() -> None:
    scores = {"entity_extraction": 1.0, "schema_mapping": 0.0, "pattern_match": 0.0}
    weights = {"entity_extraction": 2, "schema_mapping": 1, "pattern_match": 1, "no_ambiguities": 0}
    with override_settings(AGENTDESK_UNDERSTANDING_WEIGHTS=weights):
        assert confidence.overall(scores, confidence.weights()) == 0.5


@pytest.mark.parametrize(
    "weights",
    [
        {"entity_extraction": 1, "schema_mapping": 1, "pattern_match": 1},  # one missing
        {**confidence.SEED_WEIGHTS, "no_ambiguities": -0.2},
        dict.fromkeys(confidence.COMPONENTS, 0),
    ],
)
def test_wrong_weights_are_a_configuration_error(weights: dict[str, float]) -> None:
    with pytest.raises(ImproperlyConfigured, match="AGENTDESK_UNDERSTANDING_WEIGHTS"):
        confidence.checked_weights(weights)


def test_a_reply_that_is_no_understanding_has_confidence_zero_and_asks_what_is_meant() -> None:
    understood = reading.parse("I think you want the top customers.")

    assert not understood.readable
    assert confidence.overall(understood.scores(), confidence.SEED_WEIGHTS) == 0.0
    question, kind, options = clarify.question_for(understood)
    assert kind == "missing_info"
    assert options == []
    assert question.endswith("Could you say it another way?")


def test_confidences_out_of_range_are_clipped_and_unknown_types_are_missing_info() -> None:
    understood = reading.parse(
        "```json\n"
        + json.dumps(
            {
                "entity_confidence": 7,
                "pattern_confidence": "high",
                "mappings": [{"entity": "x", "field": "y", "confidence": -1}],
                "ambiguities": [{"type": "vibes", "entity": "when"}],
            }
        )
        + "\n```"
    )
    assert understood.scores() == {
        "entity_extraction": 1.0,
        "schema_mapping": 0.0,
        "pattern_match": 0.0,
        "no_ambiguities": 0.0,
    }
    assert understood.ambiguities[0].type == "missing_info"


def test_the_question_is_the_ambiguity_with_candidates_as_options() -> None:
    ambiguities = [{"type": "filter_value", "entity": "period"}, *SEED_REPLY["ambiguities"]]
    reply = {**SEED_REPLY, "ambiguities": ambiguities}
    question, kind, options = clarify.question_for(reading.parse(json.dumps(reply)))

    assert (question, kind, options) == (
        "By 'sales', do you mean 'amount' or 'revenue'?",
        "column_ambiguity",
        ["amount", "revenue"],
    )


def _asked(request: str, *, answered: str = "") -> RecordedRequest:
    snapshot = {"system_prompt": "You analyse the agency's data.", "tools": []}
    conversation = [Message.system("..."), Message.user(request)]
    if answered:
        conversation.append(Message.user(answered))
    messages = reading.request_messages(snapshot, request, conversation)  # type: ignore[arg-type]
    body = {"messages": [m.to_dict() for m in messages]}
    return RecordedRequest("openai", "/v1/chat/completions", {}, body, None)


def test_the_demo_model_is_unsure_of_an_ambiguous_request_until_a_person_answers() -> None:
    def score(request: RecordedRequest) -> float:
        reply = understand(request)
        assert reply is not None
        return confidence.overall(reading.parse(reply).scores(), confidence.SEED_WEIGHTS)

    ambiguous = _asked("Who are our best customers?")
    assert score(ambiguous) < 0.7
    understood = reading.parse(understand(ambiguous) or "")
    assert clarify.question_for(understood)[1:] == (
        "column_ambiguity",
        ["lead score", "deals won", "deal value"],
    )
    answered = _asked("Who are our best customers?", answered="lead score")
    assert score(answered) >= 0.7
    assert score(_asked("How many contacts were created this week?")) >= 0.7
    plain = RecordedRequest("openai", "/v1/chat/completions", {}, {"messages": []}, None)
    assert understand(plain) is None  # not an understanding request: the plays answer it
