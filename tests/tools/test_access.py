"""A tool's required permissions (seed 004's PermissionChecker: checked against the agent's tool
patterns, denied wins) and required modules (the agency's ``enabled_modules``): the decision,
the reads behind it, and the refusal of a call at call time."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import transaction
from django.test import Client
from pytest_django.fixtures import Settings

from agents.llm import ToolCall as LLMToolCall
from agents.models import Agent, Execution, ExecutionStatus
from core import tenancy
from core.models import BUILTIN_MODULES, Agency, Role
from tests.agents.factories import AgentFactory
from tests.factories import AgencyFactory, MembershipFactory
from tests.tools.factories import ToolFactory
from tools import registry
from tools.access import (
    MISSING_PERMISSION,
    MODULE_DISABLED,
    TOOL_NOT_ALLOWED,
    decide_tool,
    missing_modules,
    missing_permissions,
)
from tools.calls import CallRequest
from tools.executor import execute_tool_call
from tools.handlers import ToolContext
from tools.models import ToolCall, ToolCallStatus
from tools.policy import ToolPolicy
from tools.selectors import agency_enabled_modules, clear_modules_cache, tool_access_now

# --- the decision (pure) ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("required", "allowed", "denied", "missing"),
    [
        ([], [], [], []),  # nothing required: nothing to grant (the seed skips the check)
        (["crm_write"], ["crm_write"], [], []),  # `allowed === permission`
        (["crm_write"], ["crm_*"], [], []),  # `permission.startsWith(allowed.slice(0, -1))`
        (["crm_write"], ["crm_*"], ["crm_write"], ["crm_write"]),  # explicitly denied wins
        (["crm_write"], ["*"], ["crm_*"], ["crm_write"]),  # denied takes wildcards here too
        (["crm_write"], [], [], ["crm_write"]),  # an empty allowed list grants nothing
        (["crm_write"], ["email_*"], [], ["crm_write"]),
        (["crm_read", "crm_write"], ["crm_read"], [], ["crm_write"]),  # every one must pass
    ],
)
def test_required_permissions_follow_the_seeds_permission_checker(
    required: list[str], allowed: list[str], denied: list[str], missing: list[str]
) -> None:
    assert missing_permissions(required, allowed, denied) == missing


def test_required_modules_must_all_be_enabled() -> None:
    assert missing_modules([], []) == []
    assert missing_modules(["crm"], {"crm", "email"}) == []
    assert missing_modules(["CRM "], {"crm"}) == []  # hand-written names are normalised
    assert missing_modules(["crm", "booking"], {"crm"}) == ["booking"]


def _decide(**overrides: Any) -> Any:
    arguments: dict[str, Any] = {
        "requires_permissions": ["crm_write"],
        "requires_modules": ["crm"],
        "allowed": ["crm_*"],
        "denied": [],
        "enabled_modules": {"crm"},
    }
    arguments.update(overrides)
    return decide_tool("crm_add_note", **arguments)


def test_decide_tool_names_the_first_failing_check() -> None:
    assert _decide().allowed
    assert _decide(denied=["crm_add_*"]).code == TOOL_NOT_ALLOWED
    lacking = _decide(allowed=["crm_add_note"])
    assert (lacking.allowed, lacking.code) == (False, MISSING_PERMISSION)
    assert lacking.details() == {"missing_permissions": ["crm_write"]}
    disabled = _decide(enabled_modules=set())
    assert (disabled.allowed, disabled.code) == (False, MODULE_DISABLED)
    assert disabled.details() == {"disabled_modules": ["crm"]}


# --- the reads ----------------------------------------------------------------------------------


@pytest.fixture
def fresh_catalogue(settings: Settings) -> Iterator[None]:
    """Modules read from the database on every call, as the end-to-end worker does."""
    settings.AGENTDESK_CATALOGUE_CACHE_SECONDS = 0
    yield
    clear_modules_cache()


@pytest.mark.django_db
def test_a_new_agency_has_the_built_in_modules_enabled(fresh_catalogue: None) -> None:
    agency = AgencyFactory.create()
    assert sorted(agency.enabled_modules) == sorted(BUILTIN_MODULES)
    with tenancy.agency_context(agency.id):
        assert agency_enabled_modules(agency.id) == frozenset(BUILTIN_MODULES)


@pytest.mark.django_db
def test_enabled_modules_of_another_agency_read_as_none(fresh_catalogue: None) -> None:
    mine, theirs = AgencyFactory.create(), AgencyFactory.create(enabled_modules=["crm"])
    with tenancy.agency_context(mine.id):
        assert agency_enabled_modules(theirs.id) == frozenset()
    with tenancy.agency_context(theirs.id):
        assert agency_enabled_modules(theirs.id) == frozenset({"crm"})


def _noop(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    return {"ran": True, **args}


@pytest.fixture
def handlers() -> Iterator[list[str]]:
    names = ["acme_ledger_read", "acme_ledger_lookup"]
    for name in names:
        registry.handler(name)(_noop)
    yield names
    for name in names:
        registry._HANDLERS.pop(name)


@pytest.mark.django_db
def test_tool_access_now_reads_the_tool_agent_and_agency(
    fresh_catalogue: None, handlers: list[str]
) -> None:
    agency = AgencyFactory.create(enabled_modules=["crm"])
    ToolFactory.create(
        agency=agency,
        name="acme_ledger_read",
        requires_permissions=["ledger_read"],
        requires_modules=["accounting"],
    )
    agent = AgentFactory.create(agency=agency, allowed_tools=["acme_*"])
    other = AgencyFactory.create()
    ToolFactory.create(agency=other, name="acme_ledger_lookup")

    def now(name: str, agent_id: uuid.UUID = agent.id) -> Any:
        with tenancy.agency_context(agency.id):
            return tool_access_now(agency_id=agency.id, agent_id=agent_id, tool_name=name)

    assert now("acme_ledger_read").code == MISSING_PERMISSION
    with tenancy.platform_context():
        Agent.objects.filter(pk=agent.id).update(allowed_tools=["acme_*", "ledger_*"])
    assert now("acme_ledger_read").code == MODULE_DISABLED
    with tenancy.platform_context():
        Agency.objects.filter(pk=agency.id).update(enabled_modules=["crm", "accounting"])
    assert now("acme_ledger_read").allowed
    # Another agency's tool, an unknown agent, a tool without a handler: nothing to say.
    assert now("acme_ledger_lookup") is None
    assert now("acme_ledger_read", agent_id=uuid.uuid4()) is None
    assert now("no_such_tool") is None


# --- call time ----------------------------------------------------------------------------------


def _execution(agent: Agent) -> Execution:
    with tenancy.agency_context(agent.agency_id):
        return Execution.objects.create(
            agency_id=agent.agency_id, agent=agent, site_id=agent.site_id,
            trigger_type="manual", status=ExecutionStatus.RUNNING,
        )  # fmt: skip


def _call(execution: Execution, name: str, tools: dict[str, ToolPolicy]) -> tuple[Any, ToolCall]:
    request = CallRequest(
        agency_id=execution.agency_id,
        site_id=execution.site_id,
        agent_id=execution.agent_id,
        execution_id=execution.id,
        call=LLMToolCall(
            id=f"call-{uuid.uuid4().hex[:6]}", name=name, arguments={}, raw_arguments="{}"
        ),
        tools=tools,
        constraints=[],
        may_have_run=False,
    )
    with transaction.atomic(), tenancy.agency_context(execution.agency_id):
        outcome = execute_tool_call(request)
        recorded = ToolCall.objects.get(execution_id=execution.id, tool_call_id=request.call.id)
    return outcome, recorded


def _policy(name: str, **extra: Any) -> ToolPolicy:
    policy: ToolPolicy = {"name": name, "description": "", "parameters": {"type": "object"}}
    policy.update(extra)  # type: ignore[typeddict-item]
    return policy


@pytest.mark.django_db
def test_a_call_of_a_tool_the_run_was_not_offered_is_refused_with_the_reason(
    fresh_catalogue: None, handlers: list[str]
) -> None:
    agency = AgencyFactory.create(enabled_modules=["accounting"])
    ToolFactory.create(
        agency=agency,
        name="acme_ledger_read",
        requires_permissions=["ledger_read"],
        requires_modules=["accounting"],
    )
    agent = AgentFactory.create(agency=agency, allowed_tools=["acme_*"])
    execution = _execution(agent)

    def refused() -> tuple[str, Any]:
        # The run was not offered the tool (agents.runtime.setup); the model calls it anyway.
        outcome, recorded = _call(execution, "acme_ledger_read", tools={})
        assert "ran" not in outcome.output
        assert recorded.status == ToolCallStatus.DENIED
        assert recorded.error_code == outcome.output["error"]["code"]
        assert recorded.error == outcome.output["error"]["message"]
        return recorded.error_code, outcome.output["error"].get("details")

    assert refused() == (MISSING_PERMISSION, {"missing_permissions": ["ledger_read"]})
    with tenancy.platform_context():
        Agent.objects.filter(pk=agent.id).update(allowed_tools=["acme_*", "ledger_*"])
        Agency.objects.filter(pk=agency.id).update(enabled_modules=["crm"])
    assert refused() == (MODULE_DISABLED, {"disabled_modules": ["accounting"]})
    # A name the patterns deny keeps the plain refusal, whatever else is missing.
    with tenancy.platform_context():
        Agent.objects.filter(pk=agent.id).update(denied_tools=["acme_ledger_*"])
    code, details = refused()
    assert code == TOOL_NOT_ALLOWED
    assert details == {"available": []}


@pytest.mark.django_db
def test_an_offered_tool_is_refused_once_the_agency_turns_its_module_off(
    fresh_catalogue: None, handlers: list[str]
) -> None:
    agency = AgencyFactory.create(enabled_modules=["accounting"])
    agent = AgentFactory.create(agency=agency, allowed_tools=["acme_*"])
    execution = _execution(agent)
    # The run's snapshot offered the tool when the module was on.
    tools = {"acme_ledger_read": _policy("acme_ledger_read", requires_modules=["accounting"])}
    outcome, _ = _call(execution, "acme_ledger_read", tools)
    assert outcome.output == {"ran": True}

    with tenancy.platform_context():
        Agency.objects.filter(pk=agency.id).update(enabled_modules=["crm"])
    outcome, recorded = _call(execution, "acme_ledger_read", tools)
    assert outcome.output["error"]["code"] == MODULE_DISABLED
    assert outcome.output["error"]["details"] == {"disabled_modules": ["accounting"]}
    assert (recorded.status, recorded.error_code) == (ToolCallStatus.DENIED, MODULE_DISABLED)


@pytest.mark.django_db
def test_rate_limiter_outage_refuses_the_call_with_a_tool_error(
    settings: Settings, handlers: list[str]
) -> None:
    # Nothing listens on port 1: every connection is refused, as when Redis is down.
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    agent = AgentFactory.create(allowed_tools=["acme_*"])
    tools = {"acme_ledger_read": _policy("acme_ledger_read", rate_limit_per_minute=5)}
    outcome, recorded = _call(_execution(agent), "acme_ledger_read", tools)

    assert outcome.output["error"]["code"] == "rate_limit_unavailable"
    assert "ran" not in outcome.output  # fail closed: an uncounted call does not run
    assert (recorded.status, recorded.error_code) == (
        ToolCallStatus.FAILED,
        "rate_limit_unavailable",
    )


# --- the agency admin -----------------------------------------------------------------------------


@pytest.mark.django_db
def test_an_agency_admin_edits_the_enabled_modules(fresh_catalogue: None) -> None:
    agency = AgencyFactory.create()
    user = MembershipFactory.create(agency=agency, role=Role.ADMIN).user
    client = Client()
    client.force_login(user)
    url = f"/admin/core/agency/{agency.id}/change/"
    page = client.get(url)
    assert page.status_code == 200
    assert b'name="enabled_modules"' in page.content

    response = client.post(
        url,
        {"name": agency.name, "enabled_modules": "crm,accounting", "embedding_provider": "local"},
        follow=False,
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    refused = client.post(
        url, {"name": agency.name, "enabled_modules": "crm,Bad Name", "embedding_provider": "local"}
    )
    assert refused.status_code == 200  # the form again, with the error
    with tenancy.platform_context():
        agency.refresh_from_db()
    assert agency.enabled_modules == ["crm", "accounting"]
