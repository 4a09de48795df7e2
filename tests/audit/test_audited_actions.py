"""Each audited action writes its entry through the product's own services: the action, the
object, the changed fields' before and after, and secrets never written (table-driven)."""

from __future__ import annotations

import copy
import datetime
import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth import authenticate, get_user_model
from django.test import Client, RequestFactory

from agents.services.agents import agent_update
from agents.services.providers import llm_provider_create, llm_provider_update
from approvals.risk_rules import risk_rule_create, risk_rule_update
from approvals.services import approval_decide
from audit.chain import REDACTED
from audit.context import Actor, actor_context
from audit.models import ActorType, AuditEntry
from core import tenancy
from core.api_keys.services import api_key_create, api_key_revoke
from core.models import Agency, Role
from datasets.services import dataset_delete, dataset_upload
from members.services import invitation_create, invitation_revoke, membership_change_role
from sso.models import SsoProvider
from tests.agents.factories import AgentFactory, ExecutionFactory
from tests.approvals.factories import ApprovalFactory
from tests.factories import AgencyFactory, MembershipFactory
from tests.tools.factories import ToolCallFactory
from tools.mcp.services.servers import mcp_server_create
from usage.budgets import budget_create, budget_set_limit
from webhooks.services import webhook_create, webhook_rotate

pytestmark = pytest.mark.django_db

PERSON = Actor(ActorType.USER, user_id=None, display="ann", ip="192.0.2.7", user_agent="UA/1")


def _entries(agency: Agency) -> list[AuditEntry]:
    with tenancy.agency_context(agency.pk):
        return list(AuditEntry.objects.order_by("seq"))


def _api_key_minted(agency: Agency) -> Any:
    key, raw = api_key_create(agency_id=agency.pk, name="ci", role=Role.STAFF)
    return key, raw


def _api_key_revoked(agency: Agency) -> Any:
    key, raw = api_key_create(agency_id=agency.pk, name="ci", role=Role.STAFF)
    return api_key_revoke(api_key=key), raw


def _agent_prompt_changed(agency: Agency) -> Any:
    agent = AgentFactory.create(agency=agency, system_prompt="Be brief.")
    return agent_update(agent=agent, system_prompt="Be thorough."), None


def _provider_key_changed(agency: Agency) -> Any:
    provider = llm_provider_create(
        agency_id=agency.pk, provider_name="openai", api_key="sk-old-secret-1"
    )
    return llm_provider_update(provider=provider, api_key="sk-new-secret-2"), "sk-new-secret-2"


def _provider_created(agency: Agency) -> Any:
    secret = "sk-created-secret-3"
    return llm_provider_create(agency_id=agency.pk, provider_name="openai", api_key=secret), secret


def _role_changed(agency: Agency) -> Any:
    MembershipFactory.create(agency=agency, role=Role.ADMIN)  # the last admin keeps theirs
    member = MembershipFactory.create(agency=agency, role=Role.STAFF)
    return membership_change_role(membership=member, role=Role.APPROVER), None


def _invited(agency: Agency) -> Any:
    return invitation_create(agency=agency, email="new@example.com", role=Role.VIEWER), None


def _invitation_revoked(agency: Agency) -> Any:
    invitation = invitation_create(agency=agency, email="new@example.com", role=Role.VIEWER)
    return invitation_revoke(invitation=invitation), None


def _risk_rule_changed(agency: Agency) -> Any:
    rule = risk_rule_create(
        agency_id=agency.pk, name="Mail", tool_pattern="email_*", risk_level="high"
    )
    return risk_rule_update(rule=rule, risk_level="low"), None


def _budget_created(agency: Agency) -> Any:
    return budget_create(
        agency_id=agency.pk, date=datetime.date(2026, 11, 29), limit_usd=Decimal("5.00")
    ), None


def _budget_limit_changed(agency: Agency) -> Any:
    budget = budget_create(
        agency_id=agency.pk, date=datetime.date(2026, 11, 29), limit_usd=Decimal("5.00")
    )
    return budget_set_limit(budget=budget, limit_usd=Decimal("7.5")), None


def _approval_denied(agency: Agency) -> Any:
    call = ToolCallFactory.create(
        execution=ExecutionFactory.create(agent=AgentFactory.create(agency=agency))
    )
    approval = ApprovalFactory.create(tool_call=call)
    return approval_decide(
        approval=approval, approve=False, user_id=None, reason="Too many recipients"
    ), None


def _webhook_rotated(agency: Agency) -> Any:
    agent = AgentFactory.create(agency=agency)
    webhook, _ = webhook_create(agent=agent, name="crm")
    rotated, secret = webhook_rotate(webhook=webhook)
    return rotated, secret


def _mcp_server_added(agency: Agency) -> Any:
    server = mcp_server_create(
        agency_id=agency.pk,
        name="Docs",
        slug="docs",
        url="https://mcp.example.com/mcp",
        headers={"Authorization": "Bearer mcp-secret-4"},
    )
    return server, "mcp-secret-4"


def _subscription_rotated(agency: Agency) -> Any:
    from webhooks.outbound.services import subscription_create, subscription_rotate

    subscription, _ = subscription_create(
        agency_id=agency.pk, name="CRM", url="http://127.0.0.1:9/hook", event_types=["ai.*"]
    )
    return subscription_rotate(subscription=subscription)


def _sso_provider_added(agency: Agency) -> Any:
    provider = SsoProvider(
        agency=agency,
        slug="acme",
        display_name="Acme SSO",
        issuer="https://login.example.com",
        client_id="agentdesk",
        allowed_domains=["example.com"],
    )
    provider.set_client_secret("sso-secret-5")
    provider.save()
    return provider, "sso-secret-5"


def _dataset_deleted(agency: Agency) -> Any:
    dataset = dataset_upload(
        agency=agency, name="sales", file_name="sales.csv", content=b"customer,value\nAcme,5\n"
    )
    deleted = copy.copy(dataset)  # (a deleted instance's pk is None)
    dataset_delete(dataset=dataset)
    return deleted, None


def _agency_retention_changed(agency: Agency) -> Any:
    with tenancy.agency_context(agency.pk):
        agency.audit_retention_days = 30
        agency.save()
    return agency, None


Case = tuple[Callable[[Agency], Any], str, dict[str, list[Any]]]
CASES: dict[str, Case] = {
    "api key minted": (_api_key_minted, "api_key.created", {"name": [None, "ci"]}),
    "api key revoked": (_api_key_revoked, "api_key.revoked", {}),
    "agent prompt": (_agent_prompt_changed, "agent.updated",
                     {"system_prompt": ["Be brief.", "Be thorough."]}),
    "provider key": (_provider_key_changed, "llm_provider.updated",
                     {"api_key_encrypted": [REDACTED, REDACTED]}),
    "provider created": (_provider_created, "llm_provider.created",
                         {"api_key_encrypted": [None, REDACTED]}),
    "member role": (_role_changed, "membership.updated", {"role": ["staff", "approver"]}),
    "invitation": (_invited, "invitation.created", {"email": [None, "new@example.com"]}),
    "invitation revoked": (_invitation_revoked, "invitation.revoked", {}),
    "risk rule": (_risk_rule_changed, "risk_rule.updated", {"risk_level": ["high", "low"]}),
    "budget created": (_budget_created, "budget.created", {"limit_usd": [None, "5"]}),
    "budget limit": (_budget_limit_changed, "budget.updated", {"limit_usd": ["5", "7.5"]}),
    "approval denied": (_approval_denied, "approval.denied",
                        {"status": ["pending", "denied"],
                         "decision_reason": ["", "Too many recipients"]}),
    "webhook secret": (_webhook_rotated, "webhook.updated",
                       {"secret_encrypted": [REDACTED, REDACTED]}),
    "sso provider": (_sso_provider_added, "sso_provider.created",
                     {"client_secret_encrypted": [None, REDACTED],
                      "issuer": [None, "https://login.example.com"]}),
    "dataset deleted": (_dataset_deleted, "dataset.deleted", {}),
    "mcp server": (_mcp_server_added, "mcp_server.created",
                   {"headers_encrypted": [None, REDACTED]}),
    "outbound subscription": (
        _subscription_rotated,
        "webhook_subscription.updated",
        {"secret_encrypted": [REDACTED, REDACTED]},
    ),
    "agency retention": (_agency_retention_changed, "agency.updated",
                         {"audit_retention_days": [365, 30]}),
}  # fmt: skip


@pytest.mark.parametrize("case", CASES.keys())
def test_the_action_writes_its_entry_with_changes_and_no_secret(case: str) -> None:
    act, action, expected = CASES[case]
    agency = AgencyFactory.create()
    with actor_context(PERSON), tenancy.agency_context(agency.pk):
        obj, secret = act(agency)
    entry = [e for e in _entries(agency) if e.action == action][-1]
    assert (entry.object_type, entry.object_id) == (obj._meta.label_lower, str(obj.pk))
    assert (entry.actor_type, entry.actor_display, entry.ip) == ("user", "ann", "192.0.2.7")
    for name, before_after in expected.items():
        assert entry.changes[name] == before_after
    assert "updated_at" not in entry.changes
    if secret:
        assert secret not in json.dumps([e.changes for e in _entries(agency)])
        assert secret not in json.dumps([e.object_repr for e in _entries(agency)])


def test_api_key_hash_is_redacted_when_minted() -> None:
    agency = AgencyFactory.create()
    with tenancy.agency_context(agency.pk):
        key, _ = api_key_create(agency_id=agency.pk, name="ci")
    (entry,) = [e for e in _entries(agency) if e.action == "api_key.created"]
    assert entry.changes["secret_hash"] == [None, REDACTED]
    assert key.secret_hash not in json.dumps(entry.changes)


def test_a_save_that_changes_nothing_recorded_writes_nothing() -> None:
    agency = AgencyFactory.create()
    with tenancy.agency_context(agency.pk):
        rule = risk_rule_create(
            agency_id=agency.pk, name="Mail", tool_pattern="email_*", risk_level="high"
        )
    count = len(_entries(agency))
    with tenancy.agency_context(agency.pk):
        risk_rule_update(rule=rule, risk_level=rule.risk_level)
    assert len(_entries(agency)) == count


def test_an_approval_asked_by_a_run_is_not_recorded_only_its_decision() -> None:
    agency = AgencyFactory.create()
    call = ToolCallFactory.create(
        execution=ExecutionFactory.create(agent=AgentFactory.create(agency=agency))
    )
    ApprovalFactory.create(tool_call=call)
    assert [e.action for e in _entries(agency) if e.action.startswith("approval")] == []


def test_a_budget_the_system_carries_over_is_not_recorded() -> None:
    from usage.models import Budget

    agency = AgencyFactory.create()
    with tenancy.agency_context(agency.pk):
        Budget.objects.create(agency=agency, date=datetime.date(2026, 11, 29), limit_usd=1)
    assert [e.action for e in _entries(agency) if e.action.startswith("budget")] == []


def test_login_and_failed_login_are_recorded_with_the_address() -> None:
    member = MembershipFactory.create()
    user = member.user
    client = Client(REMOTE_ADDR="198.51.100.4", HTTP_USER_AGENT="Browser/2")
    for password in ("wrong-guess", "pw-for-tests"):
        client.post("/admin/login/", {"username": user.username, "password": password})
    failed, ok = [e for e in _entries(member.agency) if e.action.startswith("auth.")]
    assert (failed.action, failed.actor_display, failed.ip) == (
        "auth.login_failed",
        user.username,
        "198.51.100.4",
    )
    assert "wrong-guess" not in json.dumps(failed.changes)
    assert (ok.action, ok.actor_user_id, ok.user_agent) == ("auth.login", user.pk, "Browser/2")


def test_a_failed_login_of_an_unknown_name_goes_to_the_platform_chain() -> None:
    request = RequestFactory().post("/admin/login/", REMOTE_ADDR="198.51.100.5")
    assert authenticate(request, username="nobody-here", password="x") is None
    with tenancy.platform_context():
        entry = AuditEntry.objects.filter(agency__isnull=True).order_by("-seq").first()
    assert entry is not None
    assert (entry.action, entry.object_repr, entry.ip) == (
        "auth.login_failed",
        "nobody-here",
        "198.51.100.5",
    )
    assert get_user_model().objects.filter(username="nobody-here").count() == 0
