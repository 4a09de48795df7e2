"""What a test case expects of a run, checked one by one (pass or fail, with a detail).

``TestCase.expectations`` is a JSON object; every key is optional:

==================  =========================================================================
``must_call``       tool-name patterns (tools/patterns.py: ``crm_*``): each must match a call
                    the run made that completed (not refused, unrecorded or failed)
``must_not_call``   patterns no call of the run may match (answered or not)
``arguments``       ``[{"tool": pattern, "match": {...}}]``: a call of a matching tool whose
                    arguments hold every key of ``match`` with an equal value
``output_contains`` texts the final answer must contain
``output_regex``    a regular expression the final answer must match (``re.search``)
``output_schema``   a JSON Schema the final answer, parsed as JSON, must satisfy
``max_steps``       the most steps the run may take
``max_cost_usd``    the most the run may cost
``final_status``    the status the run must end (or park) in: ``completed``,
                    ``waiting_approval``, ...
``judge_rubric``    what a good run does, in words: an LLM judge (evals/judge.py) reads the
                    case's input, the run's tool calls and final answer and the rubric, and
                    scores it from 0 to 1 with a reason (check ``judge``), after the others
``judge_min_score`` the judge's lowest passing score, 0 to 1 (default 0.7); with a rubric only
==================  =========================================================================

The judge's check fails with no score when its reply is not the JSON asked for ("judge failed:
..."), its model call failed, or the agency's evaluation budget is exhausted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, NotRequired, TypedDict

import jsonschema

from agents.models import ExecutionStatus
from core.exceptions import ApplicationError
from tools.patterns import InvalidPattern, pattern_matches, validate_pattern


class ArgumentMatch(TypedDict):
    tool: str
    match: dict[str, Any]


class Expectations(TypedDict):
    must_call: NotRequired[list[str]]
    must_not_call: NotRequired[list[str]]
    arguments: NotRequired[list[ArgumentMatch]]
    output_contains: NotRequired[list[str]]
    output_regex: NotRequired[str]
    output_schema: NotRequired[dict[str, Any]]
    max_steps: NotRequired[int]
    max_cost_usd: NotRequired[float]
    final_status: NotRequired[str]
    judge_rubric: NotRequired[str]
    judge_min_score: NotRequired[float]


KEYS = frozenset(Expectations.__annotations__)
JUDGE_MIN_SCORE = 0.7


class Check(TypedDict):
    check: str
    passed: bool
    detail: str


@dataclass(frozen=True, slots=True)
class Call:
    tool: str
    arguments: Mapping[str, Any]
    answered: bool  # recorded reply given (not refused, not unrecorded)


@dataclass(frozen=True, slots=True)
class RunFacts:
    """What a run did, as the checks read it."""

    status: str
    output: str
    steps: int
    cost_usd: Decimal
    calls: Sequence[Call] = field(default_factory=tuple)


def _bad(where: str, message: str) -> ApplicationError:
    return ApplicationError("invalid_expectations", f"{where}: {message}", status=422)


def _patterns(value: Any, where: str) -> None:
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        raise _bad(where, "a list of tool-name patterns is expected.")
    for pattern in value:
        try:
            validate_pattern(pattern)
        except InvalidPattern as exc:
            raise _bad(where, str(exc)) from None


def validate_expectations(  # noqa: PLR0912 - one branch per key
    value: Any, *, where: str = "expectations"
) -> Expectations:
    """``value`` checked (400 naming the first fault); returned as it is."""
    if not isinstance(value, dict):
        raise _bad(where, "a JSON object is expected.")
    unknown = sorted(set(value) - KEYS)
    if unknown:
        raise _bad(where, f"unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(KEYS))}.")
    for key in ("must_call", "must_not_call"):
        if key in value:
            _patterns(value[key], f"{where}.{key}")
    for i, item in enumerate(value.get("arguments", [])):
        if not (isinstance(item, dict) and isinstance(item.get("match"), dict)):
            raise _bad(f"{where}.arguments[{i}]", 'an object {"tool", "match": {...}} is expected.')
        _patterns([item.get("tool")], f"{where}.arguments[{i}].tool")
    contains = value.get("output_contains", [])
    if not isinstance(contains, list) or not all(isinstance(t, str) for t in contains):
        raise _bad(f"{where}.output_contains", "a list of texts is expected.")
    if "output_regex" in value:
        try:
            re.compile(value["output_regex"])
        except (re.error, TypeError) as exc:
            raise _bad(f"{where}.output_regex", f"not a regular expression ({exc}).") from None
    if "output_schema" in value:
        try:
            jsonschema.Draft202012Validator.check_schema(value["output_schema"])
        except jsonschema.SchemaError as exc:
            raise _bad(f"{where}.output_schema", f"not a JSON Schema ({exc.message}).") from None
    for key in ("max_steps", "max_cost_usd"):
        number = value.get(key, 0)
        if isinstance(number, bool) or not isinstance(number, int | float) or number < 0:
            raise _bad(f"{where}.{key}", "a number of zero or more is expected.")
    if "final_status" in value and value["final_status"] not in ExecutionStatus.values:
        raise _bad(f"{where}.final_status", f"one of {', '.join(ExecutionStatus.values)}.")
    if not isinstance(value.get("judge_rubric", ""), str):
        raise _bad(f"{where}.judge_rubric", "a text is expected.")
    if "judge_min_score" in value:
        least = value["judge_min_score"]
        if isinstance(least, bool) or not isinstance(least, int | float) or not 0 <= least <= 1:
            raise _bad(f"{where}.judge_min_score", "a number from 0 to 1 is expected.")
        if not value.get("judge_rubric"):
            raise _bad(f"{where}.judge_min_score", "a judge_rubric is needed for a judge.")
    return value  # type: ignore[return-value]


def _check(name: str, passed: bool, detail: str) -> Check:
    return {"check": name, "passed": passed, "detail": detail}


def _called(calls: Sequence[Call], pattern: str, *, answered: bool) -> list[Call]:
    return [c for c in calls if pattern_matches(pattern, c.tool) and (c.answered or not answered)]


def score(expectations: Expectations, run: RunFacts) -> list[Check]:
    """Each expectation of ``expectations`` checked against ``run``, in the table's order."""
    checks: list[Check] = []
    made = ", ".join(c.tool for c in run.calls) or "none"
    for pattern in expectations.get("must_call", []):
        found = bool(_called(run.calls, pattern, answered=True))
        checks.append(_check(f"must call {pattern}", found, f"calls answered: {made}"))
    for pattern in expectations.get("must_not_call", []):
        found = bool(_called(run.calls, pattern, answered=False))
        checks.append(_check(f"must not call {pattern}", not found, f"calls: {made}"))
    for item in expectations.get("arguments", []):
        wanted = item["match"]
        hit = any(
            all(c.arguments.get(k) == v for k, v in wanted.items())
            for c in _called(run.calls, item["tool"], answered=False)
        )
        name = f"{item['tool']} called with {json.dumps(wanted, sort_keys=True)}"
        checks.append(_check(name, hit, "" if hit else "no call had these arguments"))
    for text in expectations.get("output_contains", []):
        checks.append(_check(f"output contains {text!r}", text in run.output, ""))
    if "output_regex" in expectations:
        regex = expectations["output_regex"]
        found = re.search(regex, run.output) is not None
        checks.append(_check(f"output matches /{regex}/", found, ""))
    if "output_schema" in expectations:
        checks.append(_schema_check(expectations["output_schema"], run.output))
    if "max_steps" in expectations:
        most = expectations["max_steps"]
        checks.append(_check(f"at most {most} steps", run.steps <= most, f"{run.steps} steps"))
    if "max_cost_usd" in expectations:
        most_cost = Decimal(str(expectations["max_cost_usd"]))
        checks.append(
            _check(f"costs at most ${most_cost}", run.cost_usd <= most_cost, f"${run.cost_usd}")
        )
    if "final_status" in expectations:
        want = expectations["final_status"]
        checks.append(_check(f"ends {want}", run.status == want, f"ended {run.status}"))
    return checks


def judge_check(expectations: Expectations, score: float | None, reason: str) -> Check:
    """The LLM judge's verdict as the ``judge`` check: passed at ``judge_min_score`` or more."""
    least = float(expectations.get("judge_min_score", JUDGE_MIN_SCORE))
    if score is None:
        return _check("judge", False, reason)
    passed = score >= least
    return _check("judge", passed, f"score {score:.2f} (at least {least:.2f}): {reason}")


def _schema_check(schema: dict[str, Any], output: str) -> Check:
    name = "output satisfies the JSON Schema"
    try:
        document = json.loads(output)
    except ValueError:
        return _check(name, False, "the output is not JSON")
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(document), key=str)
    return _check(name, not errors, errors[0].message if errors else "")
