"""Each expectation of a case, checked against what a run did (evals/expectations.py), and the
matching rule of recorded calls (evals/matching.py)."""

from __future__ import annotations

from decimal import Decimal

from evals.expectations import Call, Expectations, RunFacts, score
from evals.matching import canonical, index

RUN = RunFacts(
    status="completed",
    output='{"contact": "Marcus", "score": 7}',
    steps=4,
    cost_usd=Decimal("0.0012"),
    calls=(
        Call("crm_search_contacts", {"query": "Marcus"}, answered=True),
        Call("crm_add_note", {"contact_id": "c1", "content": "Demo"}, answered=True),
        Call("email_send", {"to": ["m@example.com"]}, answered=False),  # refused
    ),
)


def _passed(expectations: Expectations) -> dict[str, bool]:
    return {check["check"]: check["passed"] for check in score(expectations, RUN)}


def test_calls_are_checked_by_pattern_and_a_refused_call_is_not_a_made_one() -> None:
    assert _passed(
        {"must_call": ["crm_*", "email_send"], "must_not_call": ["email_*", "task_*"]}
    ) == {
        "must call crm_*": True,
        "must call email_send": False,  # refused: not done
        "must not call email_*": False,  # but it was tried
        "must not call task_*": True,
    }


def test_arguments_match_when_every_named_key_is_equal() -> None:
    checks = _passed(
        {
            "arguments": [
                {"tool": "crm_add_note", "match": {"contact_id": "c1"}},
                {"tool": "crm_*", "match": {"contact_id": "c2"}},
            ]
        }
    )
    assert list(checks.values()) == [True, False]


def test_output_steps_cost_and_status() -> None:
    checks = _passed(
        {
            "output_contains": ["Marcus", "Priya"],
            "output_regex": r'"score": \d+',
            "output_schema": {"type": "object", "required": ["score"]},
            "max_steps": 3,
            "max_cost_usd": 0.002,
            "final_status": "completed",
        }
    )
    assert checks == {
        "output contains 'Marcus'": True,
        "output contains 'Priya'": False,
        'output matches /"score": \\d+/': True,
        "output satisfies the JSON Schema": True,
        "at most 3 steps": False,
        "costs at most $0.002": True,
        "ends completed": True,
    }


def test_recorded_calls_match_on_tool_and_canonical_arguments_first_one_answering() -> None:
    recording = index(
        [
            {"tool": "crm_get_contact", "arguments": {"id": 1, "fields": {"b": 2, "a": 1}},
             "output": {"first": True}, "status": "completed"},
            {"tool": "crm_get_contact", "arguments": {"fields": {"a": 1, "b": 2}, "id": 1},
             "output": {"first": False}, "status": "completed"},
        ]
    )  # fmt: skip
    key = ("crm_get_contact", canonical({"fields": {"a": 1, "b": 2}, "id": 1}))
    assert recording[key]["output"] == {"first": True}
    assert ("crm_get_contact", canonical({"fields": {"a": 1, "b": 2}, "id": 1.0})) not in recording
    assert ("crm_get_contact", canonical({"fields": {"a": 1, "b": 2}, "id": "1"})) not in recording
    assert ("crm_search", key[1]) not in recording
