"""Enumerations are TextChoices backed by CHECK constraints: the database refuses other values."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.apps import apps
from django.db import IntegrityError, connection, models, transaction

from core import tenancy
from tests.agents.factories import (
    AgentFactory,
    AgentGoalFactory,
    AgentMessageFactory,
    AgentTemplateFactory,
    DecisionPointFactory,
    ExecutionFactory,
    ExecutionStepFactory,
    LLMProviderFactory,
    StateTransitionFactory,
    TriggerLogFactory,
)
from tests.approvals.factories import ApprovalFactory, QuestionFactory, RiskRuleFactory
from tests.core.factories import EventFactory
from tests.crm.factories import (
    CalendarEventFactory,
    ContactFactory,
    EmailMessageFactory,
    NoteFactory,
    TaskFactory,
)
from tests.flow.factories import (
    ExpectedWorkflowFactory,
    LoopDetectionFactory,
    StuckRunFactory,
)
from tests.memory.factories import (
    ConversationFactory,
    EpisodeFactory,
    MemoryChangeFactory,
    MemoryFactory,
)
from tests.memory.learning.factories import (
    InvestigationFactory,
    PatternUseFactory,
    RunQualityFactory,
)
from tests.tools.factories import ToolCallFactory, ToolFactory
from tests.usage.factories import ModelPriceFactory, UsageDailyFactory

DOMAIN_APPS = ("agents", "tools", "memory", "approvals", "usage", "crm", "flow")

# (factory, column) for every enumerated column of the domain apps and core.Event.
ENUM_COLUMNS: list[tuple[Callable[..., Any], str]] = [
    (AgentFactory, "agent_type"),
    (AgentFactory, "llm_provider"),
    (AgentTemplateFactory, "agent_type"),
    (AgentTemplateFactory, "llm_provider"),
    (AgentFactory, "loop_action"),
    (AgentFactory, "stuck_action"),
    (AgentTemplateFactory, "loop_action"),
    (AgentTemplateFactory, "stuck_action"),
    (AgentGoalFactory, "comparison"),
    (ExecutionFactory, "status"),
    (ExecutionFactory, "stop_reason"),
    (ExecutionFactory, "trigger_type"),
    (ExecutionFactory, "purpose"),
    (ExecutionStepFactory, "step_type"),
    (TriggerLogFactory, "trigger_type"),
    (TriggerLogFactory, "outcome"),
    (TriggerLogFactory, "skip_reason"),
    (StateTransitionFactory, "from_state"),
    (StateTransitionFactory, "to_state"),
    (StateTransitionFactory, "transition_type"),
    (DecisionPointFactory, "decision_type"),
    (DecisionPointFactory, "decision_method"),
    (AgentMessageFactory, "message_type"),
    (AgentMessageFactory, "channel"),
    (LLMProviderFactory, "provider_name"),
    (ToolFactory, "category"),
    (ToolFactory, "handler_type"),
    (ToolCallFactory, "status"),
    (MemoryFactory, "memory_type"),
    (EpisodeFactory, "outcome"),
    (ConversationFactory, "context_type"),
    (MemoryChangeFactory, "action"),
    (RunQualityFactory, "human_mark"),
    (PatternUseFactory, "outcome"),
    (InvestigationFactory, "outcome"),
    (ExpectedWorkflowFactory, "agent_type"),
    (LoopDetectionFactory, "kind"),
    (LoopDetectionFactory, "outcome"),
    (StuckRunFactory, "state"),
    (StuckRunFactory, "action_taken"),
    (RiskRuleFactory, "risk_level"),
    (ApprovalFactory, "status"),
    (ApprovalFactory, "risk_level"),
    (QuestionFactory, "kind"),
    (QuestionFactory, "status"),
    (ModelPriceFactory, "provider"),
    (UsageDailyFactory, "purpose"),
    (UsageDailyFactory, "provider"),
    (ContactFactory, "status"),
    (ContactFactory, "source"),
    (NoteFactory, "kind"),
    (TaskFactory, "priority"),
    (TaskFactory, "status"),
    (CalendarEventFactory, "status"),
    (EmailMessageFactory, "status"),
    (EventFactory, "actor_type"),
]


def _enum_fields() -> list[tuple[type[models.Model], str]]:
    models_ = [m for m in apps.get_models() if m._meta.app_label in DOMAIN_APPS]
    models_.append(apps.get_model("core", "Event"))
    return [
        (model, field.name)
        for model in models_
        for field in model._meta.concrete_fields
        if field.choices
    ]


def test_every_enumerated_field_has_a_check_constraint() -> None:
    missing = []
    for model, name in _enum_fields():
        checks = [c for c in model._meta.constraints if isinstance(c, models.CheckConstraint)]
        if not any(f"'{name}__in'" in repr(c.condition) for c in checks):
            missing.append(f"{model._meta.label}.{name}")
    assert missing == []


def test_the_table_below_covers_every_enumerated_field() -> None:
    covered = {(factory._meta.model, column) for factory, column in ENUM_COLUMNS}  # type: ignore[attr-defined]
    assert set(_enum_fields()) <= covered


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("factory", "column"),
    ENUM_COLUMNS,
    ids=[f"{f._meta.model.__name__}.{c}" for f, c in ENUM_COLUMNS],  # type: ignore[attr-defined]
)
def test_database_rejects_a_value_outside_the_enumeration(
    factory: Callable[..., Any], column: str
) -> None:
    row = factory.create()  # type: ignore[attr-defined]
    table = row._meta.db_table
    with tenancy.agency_context(row.agency_id), connection.cursor() as cursor:
        with pytest.raises(IntegrityError, match="check constraint"), transaction.atomic():
            cursor.execute(f"UPDATE {table} SET {column} = 'zz' WHERE id = %s", [row.pk])
        # A valid value of the same column goes through: the failure was the value.
        cursor.execute(f"SELECT {column} FROM {table} WHERE id = %s", [row.pk])
        (current,) = cursor.fetchone()
        cursor.execute(f"UPDATE {table} SET {column} = %s WHERE id = %s", [current, row.pk])
        assert cursor.rowcount == 1
