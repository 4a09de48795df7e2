"""Writers of an agency's own risk rules (platform rules come from the data migration and are
changed by superusers only), with the rules the admin form applies: a valid tool pattern
(:mod:`tools.patterns`), a name unique in the agency. The condition is checked against what
:func:`approvals.risk.condition_matches` understands, so that a rule cannot fail at run time.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db import IntegrityError, transaction

from approvals.models import RiskLevel, RiskRule
from core.exceptions import ApplicationError
from tools.patterns import InvalidPattern, validate_pattern

RULE_FIELDS = frozenset(
    {
        "name", "description", "tool_pattern", "condition", "risk_level", "requires_approval",
        "priority", "is_active",
    }
)  # fmt: skip
CONDITION_KEYS = frozenset(
    {"argument", "field", "min_items", "threshold", "equals", "contains", "exists"}
)
_COUNT = {"type": "integer", "minimum": 0}
# condition_errors' rules, for the API schema: {} or an object naming the argument.
CONDITION_SCHEMA = {
    "type": "object",
    "properties": {
        "argument": {"type": "string", "minLength": 1},
        "field": {},  # tested only without "argument"
        "min_items": _COUNT,
        "threshold": _COUNT,
        "equals": {},
        "contains": {},
        "exists": {"type": "boolean"},
    },
    "additionalProperties": False,
    "anyOf": [
        {"maxProperties": 0},
        {"required": ["argument"]},
        {"required": ["field"], "properties": {"field": {"type": "string", "minLength": 1}}},
    ],
}


def _invalid(fields: dict[str, list[str]], *, status: int = 400) -> ApplicationError:
    first = next(iter(fields.values()))[0]
    return ApplicationError("invalid", f"Invalid input. {first}", fields=fields, status=status)


def condition_errors(condition: Any) -> list[str]:
    """What is wrong with a rule's ``condition`` (``[]``: nothing)."""
    if not isinstance(condition, dict):
        return ["Must be a JSON object."]
    if not condition:
        return []
    errors = [f"Unknown key {key!r}." for key in condition if key not in CONDITION_KEYS]
    name = condition.get("argument", condition.get("field"))
    if not isinstance(name, str) or not name:
        errors.append("Name the argument to test in 'argument'.")
    for key in ("min_items", "threshold"):
        if key in condition and (
            isinstance(condition[key], bool)
            or not isinstance(condition[key], int)
            or condition[key] < 0
        ):
            errors.append(f"'{key}' must be a whole number, 0 or more.")
    if "exists" in condition and not isinstance(condition["exists"], bool):
        errors.append("'exists' must be true or false.")
    return errors


def validate_rule_fields(fields: dict[str, Any]) -> None:
    unknown = set(fields) - RULE_FIELDS
    if unknown:
        raise ApplicationError("invalid", f"Unknown risk rule fields: {sorted(unknown)}.")
    errors: dict[str, list[str]] = {}
    if "tool_pattern" in fields:
        try:
            validate_pattern(fields["tool_pattern"])
        except InvalidPattern as exc:
            errors["tool_pattern"] = [exc.message]
    if "condition" in fields and (problems := condition_errors(fields["condition"])):
        errors["condition"] = problems
    if "risk_level" in fields and fields["risk_level"] not in RiskLevel.values:
        errors["risk_level"] = [f"Must be one of {', '.join(RiskLevel.values)}."]
    if errors:
        raise _invalid(errors)


def _save(rule: RiskRule) -> RiskRule:
    try:
        with transaction.atomic():
            rule.save()
    except IntegrityError as exc:
        if "approvals_riskrule_unique_name" in str(exc):
            raise _invalid(
                {"name": [f"A risk rule named {rule.name!r} already exists."]}, status=409
            ) from exc
        raise
    return rule


@transaction.atomic
def risk_rule_create(*, agency_id: uuid.UUID, **fields: Any) -> RiskRule:
    """Precondition: in the agency's context."""
    validate_rule_fields(fields)
    return _save(RiskRule(agency_id=agency_id, **fields))


def _own(rule: RiskRule, verb: str) -> None:
    if rule.agency_id is None:
        raise ApplicationError(
            "forbidden",
            f"Platform risk rules are {verb} in the admin, by the platform's superusers.",
            status=403,
        )


@transaction.atomic
def risk_rule_update(*, rule: RiskRule, **fields: Any) -> RiskRule:
    _own(rule, "changed")
    validate_rule_fields(fields)
    for name, value in fields.items():
        setattr(rule, name, value)
    return _save(rule)


@transaction.atomic
def risk_rule_delete(*, rule: RiskRule) -> None:
    _own(rule, "deleted")
    rule.delete()
