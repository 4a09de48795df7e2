"""Allowed/denied tool patterns: `*` anywhere, denied wins, an empty allowed list allows none."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tools.patterns import (
    MAX_PATTERN_LENGTH,
    InvalidPattern,
    decide,
    pattern_matches,
    validate_pattern,
    validate_patterns,
)


def is_tool_allowed(name: str, allowed: list[str], denied: list[str]) -> bool:
    return decide(name, allowed, denied).allowed


def effective_tools(names: list[str], allowed: list[str], denied: list[str]) -> list[str]:
    """The names a run may be offered, by pattern alone (the rest is tools.access)."""
    return sorted({name for name in names if is_tool_allowed(name, allowed, denied)})


SEED_TOOLS = [
    "crm_get_contact",
    "crm_search_contacts",
    "crm_create_contact",
    "crm_update_contact",
    "crm_add_note",
    "email_send",
    "email_draft",
    "calendar_create_event",
    "calendar_check_availability",
    "task_create",
    "data_query",
    "data_aggregate",
    "web_search",
    "web_scrape",
    "wait",
    "notify_user",
    "trigger_workflow",
]

names = st.from_regex(r"[a-z0-9_]{1,40}", fullmatch=True)
patterns = st.from_regex(r"[a-z0-9_]{0,10}(\*[a-z0-9_]{1,10}){0,2}\*?", fullmatch=True).filter(bool)


@pytest.mark.parametrize(
    ("pattern", "name", "expected"),
    [
        ("crm_*", "crm_get_contact", True),
        ("crm_*", "crm_", True),  # `*` matches an empty run
        ("crm_*", "xcrm_get", False),
        ("*_send", "email_send", True),
        ("*_send", "email_send_later", False),
        ("crm_*_contact", "crm_get_contact", True),
        ("crm_*_contact", "crm_search_contacts", False),
        ("*", "anything_at_all", True),
        ("email_send", "email_send", True),
        ("email_send", "email_sender", False),
        ("email_send", "email_sen", False),
        ("data.query", "data_query", False),  # characters other than `*` are literal
        (" Email_Send ", "email_send", True),  # legacy rows: stripped and lower-cased
    ],
)
def test_pattern_matches(pattern: str, name: str, expected: bool) -> None:
    assert pattern_matches(pattern, name) is expected


def test_seed_assistant_configuration_gives_expected_tools() -> None:
    allowed = ["crm_*", "email_draft", "calendar_*", "task_create", "data_query"]
    assert effective_tools(SEED_TOOLS, allowed, []) == [
        "calendar_check_availability",
        "calendar_create_event",
        "crm_add_note",
        "crm_create_contact",
        "crm_get_contact",
        "crm_search_contacts",
        "crm_update_contact",
        "data_query",
        "email_draft",
        "task_create",
    ]


def test_denied_wins_over_allowed_including_wildcards() -> None:
    assert not is_tool_allowed("email_send", ["*"], ["email_send"])
    assert not is_tool_allowed("email_send", ["email_send"], ["*_send"])
    assert is_tool_allowed("email_draft", ["email_*"], ["*_send"])
    assert effective_tools(SEED_TOOLS, ["crm_*"], ["crm_create_*", "crm_update_*"]) == [
        "crm_add_note",
        "crm_get_contact",
        "crm_search_contacts",
    ]


def test_empty_allowed_list_allows_nothing() -> None:
    assert effective_tools(SEED_TOOLS, [], []) == []
    decision = decide("crm_get_contact", [], [])
    assert not decision.allowed
    assert "no allowed tools" in decision.reason


def test_decide_names_the_deciding_pattern_for_the_model() -> None:
    denied = decide("email_send", ["*"], ["email_*"])
    assert (denied.allowed, denied.pattern) == (False, "email_*")
    assert "denied" in denied.reason
    assert "'email_*'" in denied.reason
    allowed = decide("crm_add_note", ["task_create", "crm_*"], [])
    assert (allowed.allowed, allowed.pattern) == (True, "crm_*")
    unmatched = decide("web_scrape", ["crm_*"], [])
    assert (unmatched.allowed, unmatched.pattern) == (False, None)
    assert "none of the agent's allowed" in unmatched.reason


@pytest.mark.parametrize("pattern", ["crm_*", "*_send", "*", "email_send", "a", "x" * 64, "a*b*c"])
def test_validate_pattern_accepts_well_formed_patterns(pattern: str) -> None:
    validate_pattern(pattern)


@pytest.mark.parametrize(
    ("pattern", "fragment"),
    [
        ("", "cannot be empty"),
        ("   ", "cannot be empty"),
        (" crm_*", "whitespace"),
        ("crm *", "whitespace"),
        ("crm_\t", "whitespace"),
        ("Crm_*", "'C'"),
        ("crm-*", "'-'"),
        ("crm_?", "'?'"),
        ("crm_[ab]", "'[]'"),
        ("crm.*", "'.'"),
        ("crm_**", "'**'"),
        ("x" * (MAX_PATTERN_LENGTH + 1), "maximum is 64"),
    ],
)
def test_validate_pattern_rejects_with_a_clear_message(pattern: str, fragment: str) -> None:
    with pytest.raises(InvalidPattern) as excinfo:
        validate_pattern(pattern)
    assert isinstance(excinfo.value, ValueError)
    assert fragment in str(excinfo.value)
    assert excinfo.value.pattern == pattern


def test_validate_pattern_rejects_non_strings() -> None:
    with pytest.raises(InvalidPattern, match="must be a string"):
        validate_pattern(42)  # type: ignore[arg-type]


def test_validate_patterns_reports_the_first_bad_entry() -> None:
    validate_patterns(["crm_*", "email_send"])
    with pytest.raises(InvalidPattern) as excinfo:
        validate_patterns(["crm_*", "ok", "BAD", ""])
    assert excinfo.value.index == 2
    assert str(excinfo.value).startswith("Entry 3:")


def test_validate_patterns_carries_every_bad_entry_message_in_order() -> None:
    with pytest.raises(InvalidPattern) as excinfo:
        validate_patterns(["crm_*", "crm delete", "ok", "CRM_**"])
    assert excinfo.value.index == 1
    assert len(excinfo.value.messages) == 2
    assert "whitespace" in excinfo.value.messages[0]
    assert "'CRM_**'" in excinfo.value.messages[1]
    assert not excinfo.value.messages[0].startswith("Entry")


def test_validate_patterns_rejects_a_bare_string() -> None:
    with pytest.raises(InvalidPattern, match="list of strings"):
        validate_patterns("crm_*")


# --- properties -----------------------------------------------------------------------------------


@given(name=names)
def test_star_allows_every_name_and_a_name_matches_itself(name: str) -> None:
    assert is_tool_allowed(name, ["*"], [])
    assert pattern_matches(name, name)
    validate_pattern(name)


@given(name=names, allowed=st.lists(patterns, max_size=4), denied=st.lists(patterns, max_size=4))
def test_denied_always_wins(name: str, allowed: list[str], denied: list[str]) -> None:
    if any(pattern_matches(p, name) for p in denied):
        assert not is_tool_allowed(name, [*allowed, "*", name], denied)
    else:
        assert is_tool_allowed(name, allowed, denied) == any(
            pattern_matches(p, name) for p in allowed
        )


@given(pattern=patterns, name=names)
def test_matching_agrees_with_a_reference_regex(pattern: str, name: str) -> None:
    validate_pattern(pattern)
    reference = re.fullmatch(pattern.replace("*", "[a-z0-9_]*"), name) is not None
    assert pattern_matches(pattern, name) is reference


@given(prefix=st.from_regex(r"[a-z0-9_]{0,20}", fullmatch=True), name=names)
def test_trailing_star_is_the_seeds_prefix_match(prefix: str, name: str) -> None:
    # seed 004: pattern.endsWith('*') ? name.startsWith(pattern.slice(0, -1)) : name === pattern
    assert pattern_matches(prefix + "*", name) is name.startswith(prefix)
