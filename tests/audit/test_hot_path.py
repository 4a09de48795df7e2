"""The runtime's hot path writes nothing to the audit log: a whole run (model calls, a tool
call that writes CRM data, steps, usage, the agent's stats, the day's budget) adds no entry."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from decimal import Decimal

import pytest
from django.utils import timezone

from agents.models import Agent, ExecutionStatus
from agents.runtime.loop import run_execution
from audit.context import Actor, actor_context
from audit.models import ActorType, AuditEntry
from core import tenancy
from crm.models import Contact
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import by_turn, text_reply, tool_call_reply
from tests.processes import pending_execution
from usage.budgets import budget_create
from usage.models import Budget


def _entries(agent: Agent) -> list[str]:
    with tenancy.agency_context(agent.agency_id):
        return list(AuditEntry.objects.order_by("seq").values_list("action", flat=True))


@pytest.mark.slow
def test_a_run_through_the_runtime_writes_no_audit_entry(
    make_agent: Callable[..., Agent], fake_llm_server: FakeProviderServer
) -> None:
    agent = make_agent("openai", allowed_tools=["crm_*"])
    yesterday = timezone.localdate() - datetime.timedelta(days=1)
    with (
        actor_context(Actor(ActorType.USER, display="ann")),
        tenancy.agency_context(agent.agency_id),
    ):  # a budget the run carries over to today and spends from
        budget_create(agency_id=agent.agency_id, date=yesterday, limit_usd=Decimal("10"))
    fake_llm_server.set_responder(
        by_turn(
            tool_call_reply("crm_create_contact", {"email": "lead@example.com"}),
            text_reply("Created."),
        ),
        key=agent.llm_model,
    )
    before = _entries(agent)
    assert "agent.created" in before  # what people did is there
    execution = pending_execution(agent, input_text="Add lead@example.com.")

    assert run_execution(execution.id, agency_id=agent.agency_id) == ExecutionStatus.COMPLETED
    with tenancy.agency_context(agent.agency_id):
        assert Contact.objects.filter(email="lead@example.com").exists()
        assert Budget.objects.filter(date=timezone.localdate()).exists()  # carried over
    assert _entries(agent) == before
