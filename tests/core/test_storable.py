"""What PostgreSQL cannot store (NUL in text, non-finite numbers in jsonb) made storable."""

from __future__ import annotations

import json
import math

import pytest

from agents.llm.types import Completion, Usage
from core.storable import storable_json, storable_text


def test_nul_becomes_the_replacement_character_and_non_finite_numbers_null() -> None:
    value = {"a\x00": ["x\x00y", math.nan, math.inf, 1.5, 2, True, None], "b": {"c": -math.inf}}
    assert storable_json(value) == {
        "a\ufffd": ["x\ufffdy", None, None, 1.5, 2, True, None],
        "b": {"c": None},
    }
    assert storable_text("plain") == "plain"
    assert storable_text("a\ud800b\udfff") == "a\ufffdb\ufffd"  # unpaired surrogates
    assert storable_text("caf\u00e9 \U0001f600") == "caf\u00e9 \U0001f600"  # real characters stay


@pytest.mark.django_db
def test_the_cleaned_values_are_what_jsonb_and_text_take() -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT %s::jsonb, %s::text",
            [json.dumps(storable_json({"t": "a\x00b", "n": math.nan})), storable_text("a\x00b")],
        )
        stored, text = cursor.fetchone()
    assert (json.loads(stored), text) == ({"t": "a\ufffdb", "n": None}, "a\ufffdb")


def test_a_reply_text_with_nul_is_stored_with_the_replacement_character() -> None:
    completion = Completion(
        text="Done\x00.",
        tool_calls=(),
        usage=Usage(),
        stop_reason="end",
        raw_stop_reason="stop",
        model="m",
        provider="openai",
        raw={},
        latency_ms=1.0,
    )
    assert completion.text == "Done\ufffd."
