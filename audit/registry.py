"""Which models are audited, and how: one entry per model, read by :mod:`audit.receivers`.

Every concrete field is recorded (``{field: [before, after]}``) except the row's id and
timestamps and the fields a spec skips (counters and marks the product writes by itself).
Secrets are never written: encrypted fields, and fields whose name says secret, password,
token, hash or key, appear as changed with :data:`audit.chain.REDACTED` for both values.

The runtime's hot path writes none of these (its executions, steps, tool calls and usage rows
are not here; approvals and questions are recorded when decided, not when a run asks).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db import models

from core.crypto import EncryptedTextField

Changes = dict[str, list[Any]]

ALWAYS_SKIPPED = frozenset({"id", "created_at", "updated_at"})
SECRET_NAME = re.compile(r"secret|password|token|hash|api_key|credential|private", re.IGNORECASE)


def _status_action(name: str, decided: frozenset[str]) -> Callable[[str, Changes], str | None]:
    """Only a decision is recorded: the status leaving ``pending`` for one of ``decided``."""

    def action(verb: str, changes: Changes) -> str | None:
        if verb != "updated" or "status" not in changes:
            return None
        before, after = changes["status"]
        return f"{name}.{after}" if before == "pending" and after in decided else None

    return action


def _marks(name: str, marks: Mapping[str, str]) -> Callable[[str, Changes], str | None]:
    """``{field: verb}``: a field set (from empty) names the action (``revoked_at`` ->
    ``api_key.revoked``); otherwise the default verb."""

    def action(verb: str, changes: Changes) -> str | None:
        if verb == "updated":
            for mark, named in marks.items():
                if mark in changes and changes[mark][0] is None and changes[mark][1] is not None:
                    return f"{name}.{named}"
        return f"{name}.{verb}"

    return action


@dataclass(frozen=True)
class Audited:
    label: str  # "app_label.ModelName"
    name: str  # the actions' prefix: "agent" -> agent.created, agent.updated, agent.deleted
    skip: frozenset[str] = frozenset()
    # Only these fields (besides the id): for models the product also writes by itself.
    only: frozenset[str] | None = None
    action: Callable[[str, Changes], str | None] | None = None
    # False: a row the system creates by itself (no person or API key acting) is not recorded.
    system_creates: bool = True
    agency_of: Callable[[models.Model], Any] = field(default=lambda instance: instance.agency_id)

    def action_for(self, verb: str, changes: Changes) -> str | None:
        return self.action(verb, changes) if self.action else f"{self.name}.{verb}"

    def recorded(self, model_field: models.Field[Any, Any]) -> bool:
        name = model_field.name
        if (
            name in ALWAYS_SKIPPED
            or name in self.skip
            or isinstance(model_field, models.BinaryField)
        ):
            return False
        return self.only is None or name in self.only

    @staticmethod
    def secret(model_field: models.Field[Any, Any]) -> bool:
        return isinstance(model_field, EncryptedTextField) or bool(
            SECRET_NAME.search(model_field.name)
        )


_AGENT_STATS = frozenset(
    {
        "total_runs", "successful_runs", "failed_runs", "total_tokens_used", "total_cost_usd",
        "total_actions_taken", "avg_response_time_ms", "total_response_time_ms", "last_run_at",
        "last_error", "memory_consolidated_at", "current_version", "updated_by",
    }
)  # fmt: skip

AUDITED: tuple[Audited, ...] = (
    Audited("core.Agency", "agency", agency_of=lambda instance: instance.pk),
    Audited("core.Membership", "membership"),
    Audited(
        "core.ApiKey",
        "api_key",
        skip=frozenset({"last_used_at"}),
        action=_marks("api_key", {"revoked_at": "revoked"}),
    ),
    Audited(
        "members.Invitation",
        "invitation",
        skip=frozenset({"last_sent_at"}),
        action=_marks("invitation", {"revoked_at": "revoked", "accepted_at": "accepted"}),
    ),
    Audited("agents.Agent", "agent", skip=_AGENT_STATS),
    # The agent's own entry has the configuration's before and after; a version says which.
    Audited("agents.AgentVersion", "agent_version", skip=frozenset({"config"})),
    Audited("agents.AgentGoal", "agent_goal", skip=frozenset({"current_value", "is_achieved",
                                                              "achieved_at"})),
    Audited("agents.LLMProvider", "llm_provider"),
    Audited("approvals.RiskRule", "risk_rule"),
    Audited(
        "approvals.Approval",
        "approval",
        only=frozenset({"status", "decided_by", "decision_reason", "edited_arguments",
                        "action_type"}),
        action=_status_action("approval", frozenset({"approved", "denied", "expired"})),
    ),
    Audited(
        "approvals.Question",
        "question",
        only=frozenset({"status", "user_response", "responded_by", "resolution_action",
                        "question"}),
        action=_status_action("question", frozenset({"answered", "skipped", "timed_out"})),
    ),
    # A run carries the latest day's budget over to a new day by itself: not recorded.
    Audited("usage.Budget", "budget", only=frozenset({"date", "limit_usd"}),
            system_creates=False),
    Audited("usage.EvaluationBudget", "evaluation_budget", only=frozenset({"date", "limit_usd"}),
            system_creates=False),
    Audited("usage.ModelPrice", "model_price"),
    Audited("webhooks.Webhook", "webhook", skip=frozenset({"last_delivery_at"})),
    Audited("tools.McpServer", "mcp_server", skip=frozenset({"last_refreshed_at", "last_error"})),
    # Outbound webhook subscriptions (webhooks/outbound/): their delivery counters are not.
    Audited("webhooks.Subscription", "webhook_subscription",
            skip=frozenset({"consecutive_failures"})),
    # Single sign-on: who may sign in, with which role (the client secret redacted).
    Audited("sso.SsoProvider", "sso_provider"),
    # An agency's data files: uploaded, registered, described, deleted (by staff, or past the
    # dataset retention); their rows and inferred columns (sample values) are not written.
    Audited("datasets.Dataset", "dataset", skip=frozenset({"columns"})),
)  # fmt: skip
