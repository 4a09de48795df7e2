"""Rows and logins for the inbox's tests (tests/approvals/test_inbox_*.py)."""

from __future__ import annotations

import datetime
from typing import Any

from django.db.models import Model
from django.test import Client
from django.utils import timezone

from agents.models import Agent, ExecutionStatus
from approvals.models import Approval, Question, QuestionKind, RiskLevel
from core import tenancy
from core.models import Agency, User
from tests.agents.factories import AgentFactory, ExecutionFactory
from tests.approvals.factories import ApprovalFactory, QuestionFactory
from tests.factories import MembershipFactory
from tests.tools.factories import ToolCallFactory, ToolFactory
from tools.models import ToolCallStatus

EMAIL_SCHEMA = {
    "type": "object",
    "properties": {
        "to": {"type": "array", "items": {"type": "string", "format": "email"}, "minItems": 1},
        "subject": {"type": "string", "maxLength": 120},
        "body": {"type": "string"},
    },
    "required": ["to", "subject", "body"],
}
EMAIL_ARGS = {"to": ["ann@example.com"], "subject": "Q3 offer", "body": "Hello Ann"}


def login(agency: Agency, role: str) -> tuple[Client, User]:
    user = MembershipFactory.create(agency=agency, role=role).user
    client = Client()
    client.force_login(user)
    return client, user


def waiting_approval(
    agency: Agency,
    *,
    agent: Agent | None = None,
    risk: str = RiskLevel.HIGH,
    arguments: dict[str, Any] | None = None,
    created_ago: datetime.timedelta | None = None,
    **fields: Any,
) -> Approval:
    """A run parked on an ``email_send`` call. Its tool row is an agency tool with EMAIL_SCHEMA
    (the system tool's schema leaves addresses unchecked; tool names are unique)."""
    agent = agent or AgentFactory.create(agency=agency)
    execution = ExecutionFactory.create(
        agent=agent, status=ExecutionStatus.WAITING_APPROVAL, input="Reach out to Ann."
    )
    tool = ToolFactory.create(
        agency=agency, display_name="Send Email", parameters_schema=EMAIL_SCHEMA
    )
    call = ToolCallFactory.create(
        execution=execution,
        tool=tool,
        tool_name="email_send",
        input=dict(arguments or EMAIL_ARGS),
        status=ToolCallStatus.WAITING_APPROVAL,
    )
    approval = ApprovalFactory.create(
        tool_call=call,
        risk_level=risk,
        expires_at=timezone.now() + datetime.timedelta(hours=23, minutes=30),
        **fields,
    )
    if created_ago is not None:
        approval = update(approval, created_at=timezone.now() - created_ago)
    return approval


def open_question(
    agency: Agency, *, created_ago: datetime.timedelta | None = None, **fields: Any
) -> Question:
    agent = fields.pop("agent", None) or AgentFactory.create(agency=agency)
    execution = ExecutionFactory.create(
        agent=agent,
        status=ExecutionStatus.WAITING_INPUT,
        input_request={"kind": "question", "question": fields.get("question", "?")},
    )
    if fields.get("kind") == QuestionKind.CORRECTION:
        fields.setdefault("tool_call", None)  # asked by the runtime, not by a tool call
    else:
        fields.setdefault(
            "tool_call",
            ToolCallFactory.create(
                execution=execution, tool_name="ask_user", status=ToolCallStatus.WAITING_INPUT
            ),
        )
    question = QuestionFactory.create(
        execution=execution,
        expires_at=timezone.now() + datetime.timedelta(hours=2),
        **fields,
    )
    if created_ago is not None:
        question = update(question, created_at=timezone.now() - created_ago)
    return question


def fetch[M: Model](model: type[M], pk: Any) -> M:
    """A row as it is now, read in a platform context (row-level security hides it otherwise)."""
    with tenancy.platform_context():
        return model._default_manager.get(pk=pk)


def update[M: Model](row: M, **fields: Any) -> M:
    """Set columns of ``row`` directly (a state the services would reach), in the database and
    on the object (whose related rows stay loaded)."""
    with tenancy.platform_context():
        type(row)._default_manager.filter(pk=row.pk).update(**fields)
    for name, value in fields.items():
        setattr(row, name, value)
    return row
