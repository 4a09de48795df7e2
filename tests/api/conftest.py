"""API test fixtures: two agencies with a member of every role, and clients that authenticate
the way real clients do (user tokens, API keys, sessions)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.db.models import Model
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from core import tenancy
from core.api_keys.services import api_key_create
from core.models import Agency, Role, Site, User
from tests.factories import AgencyFactory, MembershipFactory, SiteFactory, UserFactory

# Every operation of the API; the schema test fails when one is added without being listed here
# (and so fuzzed by test_fuzz).
EXPECTED_OPERATIONS = {
    "agents_list", "agents_create", "agents_retrieve", "agents_partial_update",
    "agents_destroy", "agents_execute", "agents_activate", "agents_deactivate",
    "agents_executions_list", "agents_memories_list", "agents_memories_create",
    "agents_memories_destroy", "agents_versions_list",
    "agents_versions_retrieve", "approvals_list", "approvals_retrieve",
    "approvals_decide", "executions_list", "executions_retrieve", "executions_cancel",
    "events_list", "events_retrieve", "events_emit", "tools_list", "tools_retrieve",
    "tools_create", "tools_partial_update", "tools_destroy", "usage_summary", "api_keys_list",
    "api_keys_retrieve", "api_keys_create", "api_keys_revoke", "questions_list",
    "questions_retrieve", "questions_answer",
    "members_list", "members_retrieve", "members_partial_update", "members_destroy",
    "invitations_list", "invitations_retrieve", "invitations_create", "invitations_resend",
    "invitations_revoke",
}  # fmt: skip
# What the admin manages, over the API too (issue 18).
EXPECTED_OPERATIONS |= {
    "llm_providers_list", "llm_providers_create", "llm_providers_retrieve",
    "llm_providers_partial_update", "llm_providers_destroy", "model_prices_list",
    "model_prices_create", "model_prices_retrieve", "model_prices_partial_update",
    "model_prices_destroy", "risk_rules_list", "risk_rules_create", "risk_rules_retrieve",
    "risk_rules_partial_update", "risk_rules_destroy", "budgets_list", "budgets_create",
    "budgets_retrieve", "budgets_partial_update", "budgets_destroy", "usage_periods_list",
    "usage_periods_retrieve", "usage_daily_list", "agents_tools_retrieve",
    "agents_tools_partial_update",
}  # fmt: skip

# MCP servers (issue 18, tools/mcp/).
EXPECTED_OPERATIONS |= {
    "mcp_servers_list", "mcp_servers_create", "mcp_servers_retrieve",
    "mcp_servers_partial_update", "mcp_servers_destroy", "mcp_servers_refresh",
}  # fmt: skip

# An agent's inbound webhooks (issue 18, webhooks/); the delivery endpoint is not in the schema.
EXPECTED_OPERATIONS |= {
    "webhooks_list", "webhooks_create", "webhooks_retrieve", "webhooks_partial_update",
    "webhooks_destroy", "webhooks_rotate",
}  # fmt: skip

# Outbound webhooks (issue 31, webhooks/outbound/): subscriptions, their deliveries, a resend.
EXPECTED_OPERATIONS |= {
    "outbound_webhooks_list", "outbound_webhooks_create", "outbound_webhooks_retrieve",
    "outbound_webhooks_partial_update", "outbound_webhooks_destroy", "outbound_webhooks_rotate",
    "outbound_webhook_deliveries_list", "outbound_webhook_deliveries_retrieve",
    "outbound_webhook_deliveries_resend",
}  # fmt: skip

# Learning (issue 19, memory/learning/): a run's quality and its mark, an agent's patterns.
EXPECTED_OPERATIONS |= {
    "executions_quality_retrieve", "executions_quality_mark", "agents_patterns_list",
    "agents_patterns_destroy",
}  # fmt: skip


# Evaluations (issue 28, evals/): datasets and their cases, a run saved as a case, experiments.
EXPECTED_OPERATIONS |= {
    "datasets_list", "datasets_create", "datasets_retrieve", "datasets_cases_list",
    "datasets_cases_create", "datasets_export", "datasets_import",
    "executions_save_as_test_case", "experiments_list", "experiments_create",
    "experiments_retrieve", "experiments_compare",
}  # fmt: skip

# The deploy gate (issue 28, evals/api/gate.py): an agent's gate, and making a version current.
EXPECTED_OPERATIONS |= {
    "agents_deploy_gate_retrieve", "agents_deploy_gate_set", "agents_deploy_gate_destroy",
    "agents_versions_activate",
}  # fmt: skip

# Canary versions (issue 28, evals/api/canary.py): an agent's canary, started, stopped, promoted.
EXPECTED_OPERATIONS |= {
    "agents_canary_retrieve", "agents_canary_start", "agents_canary_stop", "agents_canary_promote",
}  # fmt: skip

# Datasets for analysis (issue 30, datasets/api/): uploads, CRM queries, schemas, table results.
EXPECTED_OPERATIONS |= {
    "analysis_datasets_list", "analysis_datasets_create", "analysis_datasets_crm_query",
    "analysis_datasets_retrieve", "analysis_datasets_partial_update", "analysis_datasets_destroy",
    "analysis_results_retrieve", "analysis_results_download",
}  # fmt: skip

# The audit log's export (issue 31, audit/api/).
EXPECTED_OPERATIONS |= {"audit_entries_export"}


@dataclass
class Tenant:
    agency: Agency
    site: Site
    users: dict[str, User] = field(default_factory=dict)


def make_tenant() -> Tenant:
    agency = AgencyFactory.create()
    tenant = Tenant(agency=agency, site=SiteFactory.create(agency=agency))
    for role in Role.values:
        tenant.users[role] = MembershipFactory.create(agency=agency, role=role).user
    return tenant


@pytest.fixture
def tenant_a(db: None) -> Tenant:
    return make_tenant()


@pytest.fixture
def tenant_b(db: None) -> Tenant:
    return make_tenant()


def token_client(user: User) -> APIClient:
    token, _ = Token.objects.get_or_create(user=user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


def new_key(agency: Agency, role: str = Role.STAFF) -> str:
    """A new API key of ``agency`` (the full key, as shown once at creation)."""
    with tenancy.agency_context(agency.id):
        _key, full_key = api_key_create(agency_id=agency.id, name=f"{role} key", role=role)
    return full_key


def key_client(agency: Agency, role: str = Role.STAFF) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {new_key(agency, role)}")
    return client


@pytest.fixture
def as_role(tenant_a: Tenant) -> Callable[[str], APIClient]:
    """A token client for agency A's member of ``role``."""
    return lambda role: token_client(tenant_a.users[role])


@pytest.fixture
def superuser(db: None) -> User:
    return UserFactory.create(is_superuser=True)


def count(model: type[Model], **filters: Any) -> int:
    """Rows across every agency: "nothing written" must not depend on the reader's tenant."""
    with tenancy.platform_context():
        return model._default_manager.filter(**filters).count()


def fields_of(response: Any, status: int = 400) -> dict[str, Any]:
    """The field errors of a 400 (or of ``status``: 409 for a conflict with what exists, 422 for
    a rule the schema cannot state) in the API's error shape (asserting the shape on the way)."""
    body = response.json()
    assert response.status_code == status, body
    assert set(body) == {"message", "code", "extra"}, body
    return dict(body["extra"]["fields"])


def agent_body(tenant: Tenant, **extra: object) -> dict[str, object]:
    """A valid POST /api/v1/agents/ body on the tenant's site, with ``extra`` fields."""
    return {
        "site": str(tenant.site.id),
        "name": "Lead qualifier",
        "agent_type": "specialist",
        "system_prompt": "Qualify inbound leads.",
        **extra,
    }
