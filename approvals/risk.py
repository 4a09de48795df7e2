"""Seed 004's ``needsApproval`` / ``assessRisk``: does a tool call need a human first?

A call needs approval when its tool is dangerous, when an agent constraint asks for approval of
that tool, or when a matching risk rule rates it high or critical (or says so explicitly).
Rules change rarely and are read on every tool call, so each process caches them for
``AGENTDESK_CATALOGUE_CACHE_SECONDS``.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from django.db.models import Q

from approvals.models import RiskLevel, RiskRule
from core.catalogue import CatalogueCache
from tools.patterns import pattern_matches

HIGH_RISK = frozenset({RiskLevel.HIGH, RiskLevel.CRITICAL})


@dataclass(frozen=True)
class RiskDecision:
    needs_approval: bool
    risk_level: str
    reason: str
    rule_id: uuid.UUID | None = None

    def describe(self, tool_name: str, arguments: dict[str, Any]) -> str:
        shown = json.dumps(arguments, default=str)
        if len(shown) > 500:
            shown = shown[:497] + "..."
        return f"{tool_name}({shown})"


@dataclass(frozen=True)
class _Rule:
    id: uuid.UUID
    name: str
    tool_pattern: str
    condition: dict[str, Any]
    risk_level: str
    requires_approval: bool


_rules_cache = CatalogueCache[list[_Rule]]()


def _rules(agency_id: uuid.UUID) -> list[_Rule]:
    return _rules_cache.get(agency_id, lambda: _load_rules(agency_id))


def _load_rules(agency_id: uuid.UUID) -> list[_Rule]:
    rows = RiskRule.objects.filter(
        Q(agency_id=agency_id) | Q(agency__isnull=True), is_active=True
    ).order_by("priority", "name")
    return [
        _Rule(r.id, r.name, r.tool_pattern, r.condition or {}, r.risk_level, r.requires_approval)
        for r in rows
    ]


def clear_cache() -> None:
    _rules_cache.clear()


def condition_matches(condition: dict[str, Any], arguments: dict[str, Any]) -> bool:
    """``{}`` matches every call; otherwise ``argument`` names the argument and one test applies:
    ``min_items`` (seed: ``threshold``) for lists, ``equals``, ``contains`` or ``exists``."""
    if not condition:
        return True
    name = condition.get("argument") or condition.get("field")
    if not name:
        return True
    value = arguments.get(name)
    if "min_items" in condition or "threshold" in condition:
        minimum = int(condition.get("min_items", condition.get("threshold", 0)))
        items = value if isinstance(value, list) else ([value] if value is not None else [])
        return len(items) >= minimum
    tests = {
        "equals": lambda expected: value == expected,
        "contains": lambda needle: isinstance(value, str | list) and needle in value,
        "exists": lambda wanted: (value is not None) == bool(wanted),
    }
    return all(test(condition[key]) for key, test in tests.items() if key in condition)


def _constraint_requires_approval(constraint: Any, tool_name: str) -> str | None:
    """Constraints of the form ``{"type": "require_approval", "tools": ["email_*"]}``."""
    if not isinstance(constraint, dict) or constraint.get("type") != "require_approval":
        return None
    patterns = constraint.get("tools") or ["*"]
    if any(pattern_matches(p, tool_name) for p in patterns):
        return str(constraint.get("description") or f"Agent constraint: approve {tool_name}")
    return None


def assess_risk(
    *,
    agency_id: uuid.UUID,
    tool_name: str,
    arguments: dict[str, Any],
    dangerous: bool,
    constraints: list[Any],
) -> RiskDecision:
    rule = next(
        (
            r
            for r in _rules(agency_id)
            if pattern_matches(r.tool_pattern, tool_name)
            and condition_matches(r.condition, arguments)
        ),
        None,
    )
    level = rule.risk_level if rule else RiskLevel.LOW
    rule_id = rule.id if rule else None
    if dangerous:
        return RiskDecision(
            True, max(level, RiskLevel.HIGH, key=_rank), "Tool marked as dangerous", rule_id
        )
    for constraint in constraints:
        reason = _constraint_requires_approval(constraint, tool_name)
        if reason:
            return RiskDecision(True, level, reason, rule_id)
    if rule and (rule.requires_approval or rule.risk_level in HIGH_RISK):
        return RiskDecision(True, level, f"Risk rule {rule.name!r}: {level}", rule_id)
    # A matching rule that lets the call run says so (flow records it as a decision point).
    passed = f"Risk rule {rule.name!r}: {level}, no approval needed" if rule else ""
    return RiskDecision(False, level, passed, rule_id)


def _rank(level: str) -> int:
    return [RiskLevel.LOW, RiskLevel.MEDIUM, RiskLevel.HIGH, RiskLevel.CRITICAL].index(
        RiskLevel(level)
    )
