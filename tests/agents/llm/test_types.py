"""The gateway's values and retry arithmetic, without a server."""

from __future__ import annotations

import email.utils
import time

import pytest

from agents.llm.retry import backoff_delay, parse_retry_after
from agents.llm.types import Message, ProviderConfig, ToolCall, Usage


def test_tool_call_parses_an_object() -> None:
    call = ToolCall.from_raw(id="c1", name="t", raw_arguments='{"id": 42}')

    assert call.arguments == {"id": 42}
    assert call.arguments_error is None


def test_tool_call_with_empty_arguments_means_no_arguments() -> None:
    call = ToolCall.from_raw(id="c1", name="t", raw_arguments="")

    assert call.arguments == {}
    assert call.arguments_error is None


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        ('{"id": ', "not valid JSON"),
        ("[1, 2]", "must be a JSON object, got list"),
        # Python reads these; JSON has no such values and jsonb would refuse them.
        ('{"n": NaN}', "NaN is not a JSON value"),
        ('{"n": [-Infinity]}', "-Infinity is not a JSON value"),
        ('{"n": 1e400}', "too large a number"),
        ('{"note": "a\\u0000b"}', "NUL characters"),
        ('{"a\\u0000": 1}', "NUL characters"),
        ('{"note": "a\\ud800b"}', "unpaired UTF-16 surrogates"),
    ],
)
def test_tool_call_keeps_bad_arguments_with_an_error(raw: str, error: str) -> None:
    call = ToolCall.from_raw(id="c1", name="t", raw_arguments=raw)

    assert call.arguments == {}
    assert call.raw_arguments == raw
    assert call.arguments_error is not None
    assert error in call.arguments_error


@pytest.mark.parametrize(
    ("raw", "arguments", "text", "error"),
    [
        ({"id": 42}, {"id": 42}, '{"id": 42}', None),  # the object, from some servers
        (None, {}, "", None),  # no arguments at all
        ([1, 2], {}, "[1, 2]", "must be a JSON object, got list"),
    ],
)
def test_tool_call_takes_arguments_that_are_not_a_string(
    raw: object, arguments: dict[str, object], text: str, error: str | None
) -> None:
    call = ToolCall.from_raw(id="c1", name="t", raw_arguments=raw)

    assert call.arguments == arguments
    assert call.raw_arguments == text
    assert (call.arguments_error is None) == (error is None)
    assert error is None or error in (call.arguments_error or "")


def test_messages_round_trip_through_their_persisted_form() -> None:
    call = ToolCall.from_raw(id="c1", name="crm_get_contact", raw_arguments='{"id": 4')
    messages = [
        Message.system("sys"),
        Message.user("hi"),
        Message.assistant("looking", (call,)),
        Message.tool_result("c1", "bad arguments", is_error=True),
    ]

    restored = [Message.from_dict(m.to_dict()) for m in messages]

    assert restored == messages
    assert restored[2].tool_calls[0].arguments_error is not None


def test_usage_adds_up_and_totals_include_cache_tokens() -> None:
    total = Usage(10, 2, 100, 5) + Usage(1, 1, 0, 0)

    assert total == Usage(
        input_tokens=11, output_tokens=3, cache_read_tokens=100, cache_write_tokens=5
    )
    assert total.total_input_tokens == 116
    assert total.total_tokens == 119


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "7"}, 7.0),
        ({"retry-after": "0.5"}, 0.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after_header_is_parsed(headers: dict[str, str], expected: float | None) -> None:
    assert parse_retry_after(headers) == expected


def test_retry_after_as_an_http_date() -> None:
    later = email.utils.formatdate(time.time() + 20, usegmt=True)

    seconds = parse_retry_after({"retry-after": later})

    assert seconds is not None
    assert 15 < seconds <= 20


def test_backoff_prefers_retry_after_capped_then_doubles_up_to_the_max() -> None:
    config = ProviderConfig(
        kind="openai", model="m", backoff_base=1.0, backoff_max=3.0, retry_after_cap=30.0
    )

    assert backoff_delay(config, attempt=1, retry_after=12.0) == 12.0
    assert backoff_delay(config, attempt=1, retry_after=300.0) == 30.0
    assert 0.75 <= backoff_delay(config, attempt=1, retry_after=None) <= 1.0
    assert 1.5 <= backoff_delay(config, attempt=2, retry_after=None) <= 2.0
    assert 2.25 <= backoff_delay(config, attempt=5, retry_after=None) <= 3.0


def test_a_tool_call_keeps_what_cannot_be_stored_only_as_replacement_characters() -> None:
    # A literal NUL in the text is not JSON (an error for the model), and the text is kept for
    # the reply's record with U+FFFD in its place, as are the name's and the id's.
    call = ToolCall.from_raw(id="c\x00", name="crm\x00note", raw_arguments='{"a": "x\x00y"}')

    assert call.arguments_error is not None
    assert "not valid JSON" in call.arguments_error
    assert (call.id, call.name, call.raw_arguments) == (
        "c\ufffd",
        "crm\ufffdnote",
        '{"a": "x\ufffdy"}',
    )
