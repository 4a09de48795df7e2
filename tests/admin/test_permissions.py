"""Who may change what: read-only history, superuser-only tools, platform rows, approvals."""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from django.contrib import admin
from django.test import Client
from django.utils import timezone

from agents.models import AgentTemplate, Execution, ExecutionStatus
from approvals.models import RiskRule
from audit.models import AuditEntry
from core import tenancy
from core.admin_scoping import ReadOnlyAdminMixin
from core.models import Agency, Role, User
from memory.embeddings import DIMENSIONS
from memory.models import Memory
from tests.admin.conftest import member
from tests.admin.helpers import add_page, admin_url, change_url
from tests.admin.rows import ROWS
from tests.agents.factories import AgentFactory, ExecutionFactory
from tests.approvals.factories import RiskRuleFactory
from tests.tools.factories import ToolFactory
from tools.models import Tool
from usage.models import Budget

pytestmark = pytest.mark.django_db

# (The audit log's entries, read-only for everyone too: tests/audit/test_admin.py.)
READ_ONLY = sorted(
    (
        m
        for m, a in admin.site._registry.items()
        if isinstance(a, ReadOnlyAdminMixin) and m is not AuditEntry
    ),
    key=lambda m: m._meta.label,
)


def fetch(model: type[Any], **lookup: Any) -> Any:
    with tenancy.platform_context():
        return model.objects.get(**lookup)


def test_the_history_admins_are_read_only() -> None:
    labels = {m._meta.label for m in READ_ONLY}
    assert {
        "agents.Execution", "agents.ExecutionStep", "agents.TriggerLog", "tools.ToolCall",
        "usage.UsageDaily", "usage.UsagePeriod", "core.Event", "approvals.Approval",
    } <= labels  # fmt: skip


@pytest.mark.parametrize("model", READ_ONLY, ids=lambda m: m._meta.label)
def test_read_only_admins_refuse_add_and_change_even_to_superusers(
    model: type[Any], agency: Agency, superuser: User, login: Callable[[User], Client]
) -> None:
    row = ROWS[model](agency)
    client = login(superuser)
    url, refused = add_page(model)
    assert client.get(url, follow=True).status_code == refused
    assert client.post(url, {}, follow=True).status_code == refused
    assert client.post(change_url(row), {}).status_code == 403
    page = client.get(change_url(row))
    assert page.status_code == 200
    assert 'name="_save"' not in page.content.decode()


def _schema_form(schema: object, **overrides: str) -> dict[str, str]:
    data = {
        "name": "crm_custom_sync",
        "display_name": "Sync",
        "description": "Syncs contacts.",
        "category": "crm",
        "is_active": "on",
        "parameters_schema": json.dumps(schema),
        "returns_schema": "null",
        "handler_type": "external",
        "handler_config": "{}",
        "requires_permissions": "",
        "requires_modules": "",
        "rate_limit_per_minute": "",
        "rate_limit_per_hour": "",
    }
    return {**data, **overrides}


def test_staff_see_tools_but_cannot_change_them(
    agency: Agency, staff: User, login: Callable[[User], Client]
) -> None:
    tool = ToolFactory.create(agency=agency, name="crm_custom_sync")
    client = login(staff)
    changelist = client.get(admin_url(Tool, "changelist")).content.decode()
    assert "crm_custom_sync" in changelist  # the agency's own
    assert "email_send" in changelist  # a platform tool
    page = client.get(change_url(tool))
    assert page.status_code == 200
    assert 'name="_save"' not in page.content.decode()
    form = _schema_form({"type": "object"}, description="hijacked")
    assert client.post(change_url(tool), form).status_code == 403
    assert client.get(admin_url(Tool, "add")).status_code == 403
    assert fetch(Tool, pk=tool.pk).description == "An agency's own tool."


def test_superusers_edit_tools_and_bad_schemas_are_form_errors(
    agency: Agency, superuser: User, login: Callable[[User], Client]
) -> None:
    tool = ToolFactory.create(agency=agency, name="crm_custom_sync")
    client = login(superuser)
    bad = _schema_form({"type": "array"}, agency=str(agency.pk))
    response = client.post(change_url(tool), bad)
    assert response.status_code == 200
    assert "must describe an object" in response.content.decode()
    good = _schema_form({"type": "object", "properties": {"q": {"type": "string"}}})
    response = client.post(change_url(tool), {**good, "agency": str(agency.pk)})
    assert response.status_code == 302
    assert fetch(Tool, pk=tool.pk).parameters_schema["properties"] == {"q": {"type": "string"}}


def test_platform_rows_are_view_only_for_agency_staff(
    agency: Agency, staff: User, login: Callable[[User], Client]
) -> None:
    client = login(staff)
    with tenancy.platform_context():
        platform_rule = RiskRule.objects.filter(agency__isnull=True).first()
        template = AgentTemplate.objects.filter(is_system=True).first()
    assert platform_rule is not None
    assert template is not None
    for row in (platform_rule, template):
        page = client.get(change_url(row))
        assert page.status_code == 200
        assert 'name="_save"' not in page.content.decode()
        assert client.post(change_url(row), {"name": "hijacked"}).status_code == 403
        assert client.post(admin_url(row, "delete", row.pk), {"post": "yes"}).status_code == 403


def test_staff_edit_their_own_risk_rules_with_checked_patterns(
    agency: Agency, staff: User, login: Callable[[User], Client]
) -> None:
    rule = RiskRuleFactory.create(agency=agency, name="Bulk mail")
    form = {
        "name": "Bulk mail",
        "description": "",
        "tool_pattern": "email_*",
        "condition": "",  # cleared JSON keeps the column's default
        "risk_level": "critical",
        "requires_approval": "on",
        "priority": "10",
        "is_active": "on",
    }
    client = login(staff)
    response = client.post(change_url(rule), {**form, "tool_pattern": "Email *"})
    assert response.status_code == 200
    assert "whitespace" in response.content.decode()
    assert client.post(change_url(rule), form).status_code == 302
    saved = fetch(RiskRule, pk=rule.pk)
    assert (saved.risk_level, saved.condition) == ("critical", {})

    # A second rule with the same name in the agency is a form error, not a database error.
    response = client.post(admin_url(RiskRule, "add"), form)
    assert response.status_code == 200
    assert "already exists" in response.content.decode()


def _action(client: Client, model: type[Any], action: str, *rows: Any) -> Any:
    return client.post(
        admin_url(model, "changelist"),
        {"action": action, "_selected_action": [str(r.pk) for r in rows], "index": "0"},
    )


def test_cancel_action_cancels_a_pending_execution(
    agency: Agency, staff: User, login: Callable[[User], Client]
) -> None:
    execution = ExecutionFactory.create(agent=AgentFactory.create(agency=agency))
    assert _action(login(staff), Execution, "cancel", execution).status_code == 302
    assert fetch(Execution, pk=execution.pk).status == ExecutionStatus.CANCELLED

    viewer_execution = ExecutionFactory.create(agent=execution.agent)
    _action(login(member(agency, Role.VIEWER)), Execution, "cancel", viewer_execution)
    assert fetch(Execution, pk=viewer_execution.pk).status == ExecutionStatus.PENDING


def test_cancel_action_says_what_happened_to_each_kind_of_run(
    agency: Agency, staff: User, login: Callable[[User], Client]
) -> None:
    agent = AgentFactory.create(agency=agency)
    pending = ExecutionFactory.create(agent=agent)
    running = ExecutionFactory.create(
        agent=agent,
        status=ExecutionStatus.RUNNING,
        lease_owner="worker-1",
        lease_expires_at=timezone.now() + datetime.timedelta(minutes=5),
    )
    done = ExecutionFactory.create(agent=agent, status=ExecutionStatus.COMPLETED)

    response = login(staff).post(
        admin_url(Execution, "changelist"),
        {"action": "cancel", "_selected_action": [str(e.pk) for e in (pending, running, done)]},
        follow=True,
    )

    assert [str(m) for m in response.context["messages"]] == [
        "Cancelled 1 execution(s). Cancel requested for 1 running execution(s): each stops "
        "before its next model call or tool. 1 had already finished and were left as they were."
    ]
    assert fetch(Execution, pk=pending.pk).status == ExecutionStatus.CANCELLED
    still = fetch(Execution, pk=running.pk)
    assert (still.status, still.cancel_requested_at is not None) == (ExecutionStatus.RUNNING, True)
    assert fetch(Execution, pk=done.pk).status == ExecutionStatus.COMPLETED


def test_memory_embeddings_are_summarised_not_shown(
    agency: Agency, staff: User, login: Callable[[User], Client]
) -> None:
    memory = ROWS[Memory](agency)
    page = login(staff).get(change_url(memory)).content.decode()
    assert f"{DIMENSIONS}-dimensional vector" in page
    assert "0.125" not in page


def test_agency_admins_set_the_budget_limit_but_not_below_what_is_spent(
    agency: Agency, staff: User, login: Callable[[User], Client]
) -> None:
    budget = ROWS[Budget](agency)
    with tenancy.platform_context():
        Budget.objects.filter(pk=budget.pk).update(used_usd=Decimal("3.00"))
    assert login(staff).post(change_url(budget), {"limit_usd": "9.00"}).status_code == 403

    client = login(member(agency, Role.ADMIN))
    response = client.post(change_url(budget), {"limit_usd": "2.00"})
    assert response.status_code == 200
    assert "the limit cannot be lower" in response.content.decode()
    assert client.post(change_url(budget), {"limit_usd": "9.00"}).status_code == 302
    assert fetch(Budget, pk=budget.pk).limit_usd == Decimal("9.00")
