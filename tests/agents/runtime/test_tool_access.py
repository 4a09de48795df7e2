"""A tool's required permissions and modules in runs: a tool failing either check is not offered
to the model, a call of it anyway is refused with a structured tool error (recorded as a tool
call) and the run goes on; a rate limiter that cannot reach Redis refuses the call, not the run.

End to end with the real Celery worker, PostgreSQL, Redis and the fake provider server, except the
Redis outage: the worker's broker is that Redis too, so that run is driven in this process with
only the rate limiter pointed at a closed port."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pytest_django.fixtures import Settings

from agents.models import Agent, Execution, ExecutionStatus
from agents.runtime.loop import run_execution
from agents.runtime.setup import clear_tool_cache, usable_tools
from agents.services import execution_create
from approvals.models import Approval
from approvals.services import approval_decide
from core import tenancy
from core.models import Agency
from crm.models import Contact, EmailMessage, Note
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import by_turn, text_reply, tool_call_reply
from tests.agents.factories import AgentFactory
from tests.factories import AgencyFactory
from tests.processes import Worker, wait_for
from tests.tools.factories import ToolFactory
from tools import registry
from tools.handlers import ToolContext
from tools.models import Tool, ToolCall
from tools.selectors import clear_modules_cache


@pytest.fixture
def fresh_catalogue(settings: Settings) -> Iterator[None]:
    settings.AGENTDESK_CATALOGUE_CACHE_SECONDS = 0
    yield
    clear_tool_cache()
    clear_modules_cache()


def _offered(agent: Agent) -> list[str]:
    with tenancy.agency_context(agent.agency_id):
        return [t["name"] for t in usable_tools(agent)]


# --- what a run is offered -------------------------------------------------------------------


@pytest.mark.django_db
def test_tools_of_a_module_the_agency_has_not_enabled_are_not_offered(
    fresh_catalogue: None,
) -> None:
    agent = AgentFactory.create(allowed_tools=["crm_*", "email_*"])
    assert {"crm_get_contact", "crm_add_note", "email_send", "email_draft"} <= set(_offered(agent))

    with tenancy.platform_context():
        Agency.objects.filter(pk=agent.agency_id).update(enabled_modules=["booking"])
    offered = _offered(agent)
    assert not any(name.startswith("crm_") for name in offered)
    assert "email_send" not in offered  # requires the email module
    assert "email_draft" in offered  # requires no module


def _probe(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    return {"ran": True}


@pytest.fixture
def probe_tool() -> Iterator[str]:
    name = f"acme_probe_{uuid.uuid4().hex[:8]}"
    registry.handler(name)(_probe)
    yield name
    registry._HANDLERS.pop(name)


@pytest.mark.django_db
def test_a_tool_is_offered_only_with_its_required_permissions_granted(
    fresh_catalogue: None, probe_tool: str
) -> None:
    agency = AgencyFactory.create()
    ToolFactory.create(agency=agency, name=probe_tool, requires_permissions=["ledger_read"])
    cases: dict[str, tuple[list[str], list[str]]] = {
        "no allowed pattern matches the permission": (["acme_*"], []),
        "allowed exactly": (["acme_*", "ledger_read"], []),
        "allowed by a wildcard": (["acme_*", "ledger_*"], []),
        "explicitly denied wins": (["*"], ["ledger_read"]),
        "denied by a wildcard": (["*"], ["ledger_*"]),
    }
    offered = {}
    for case, (allowed, denied) in cases.items():
        agent = AgentFactory.create(agency=agency, allowed_tools=allowed, denied_tools=denied)
        offered[case] = probe_tool in _offered(agent)
    assert offered == {
        "no allowed pattern matches the permission": False,
        "allowed exactly": True,
        "allowed by a wildcard": True,
        "explicitly denied wins": False,
        "denied by a wildcard": False,
    }


# --- end to end --------------------------------------------------------------------------------


def _start(agent: Agent, text: str = "Handle it.") -> Execution:
    with tenancy.agency_context(agent.agency_id):
        execution = execution_create(agent=agent, input=text)
    assert execution is not None
    return execution


def _calls(execution: Execution) -> list[tuple[str, str, str]]:
    with tenancy.agency_context(execution.agency_id):
        return list(
            ToolCall.objects.filter(execution=execution)
            .order_by("created_at")
            .values_list("tool_name", "status", "error_code")
        )


@pytest.fixture
def add_note_requires_crm_write(live_db: None) -> Iterator[None]:
    """The system tool needs a permission for the length of the test (the worker reads tools
    afresh: AGENTDESK_CATALOGUE_CACHE_SECONDS=0)."""
    with tenancy.platform_context():
        Tool.objects.filter(name="crm_add_note").update(requires_permissions=["crm_write"])
    try:
        yield
    finally:
        with tenancy.platform_context():
            Tool.objects.filter(name="crm_add_note").update(requires_permissions=[])


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_a_tool_without_its_permission_is_not_offered_and_its_call_is_refused(
    kind: str,
    add_note_requires_crm_write: None,
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = make_agent(kind, allowed_tools=["crm_*"], denied_tools=["crm_write"])
    with tenancy.agency_context(agent.agency_id):
        contact = Contact.objects.create(
            agency_id=agent.agency_id, first_name="Ada", email="ada@example.com"
        )
    fake_llm_server.set_responder(
        by_turn(
            tool_call_reply("crm_add_note", {"contact_id": str(contact.id), "content": "x"}),
            text_reply("I may not write to the CRM."),
        ),
        key=agent.llm_model,
    )
    execution = wait_for(_start(agent))

    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    assert execution.output == "I may not write to the CRM."
    requests = fake_llm_server.requests_for(agent.llm_model)
    assert "crm_add_note" not in requests[0].tool_names
    assert "crm_get_contact" in requests[0].tool_names  # requires no permission
    told = json.dumps(requests[1].tool_results)
    assert "missing_permission" in told
    assert "crm_write" in told
    assert _calls(execution) == [("crm_add_note", "denied", "missing_permission")]
    with tenancy.agency_context(agent.agency_id):
        assert not Note.objects.filter(contact=contact).exists()


@pytest.mark.slow
def test_a_module_the_agency_disabled_is_not_offered_and_its_call_is_refused(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = make_agent("openai", allowed_tools=["*"])
    with tenancy.platform_context():
        Agency.objects.filter(pk=agent.agency_id).update(enabled_modules=["email", "booking"])
    fake_llm_server.set_responder(
        by_turn(
            tool_call_reply("crm_search_contacts", {"query": "ada"}),
            text_reply("The CRM is not available."),
        ),
        key=agent.llm_model,
    )
    execution = wait_for(_start(agent))

    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    requests = fake_llm_server.requests_for(agent.llm_model)
    assert not [name for name in requests[0].tool_names if name.startswith("crm_")]
    assert "calendar_create_event" in requests[0].tool_names  # booking is on
    assert "module_disabled" in json.dumps(requests[1].tool_results)
    assert _calls(execution) == [("crm_search_contacts", "denied", "module_disabled")]


@pytest.mark.slow
def test_an_approved_call_resumed_after_its_module_was_disabled_is_refused(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = make_agent("openai", allowed_tools=["email_*"])  # email_send is dangerous
    fake_llm_server.set_responder(
        by_turn(
            tool_call_reply(
                "email_send", {"to": ["client@example.com"], "subject": "Hi", "body": "Hello"}
            ),
            text_reply("E-mail is switched off."),
        ),
        key=agent.llm_model,
    )
    execution = wait_for(_start(agent), {"waiting_approval"})
    assert "email_send" in fake_llm_server.requests_for(agent.llm_model)[0].tool_names

    with tenancy.platform_context():
        Agency.objects.filter(pk=agent.agency_id).update(enabled_modules=["crm", "booking"])
    with tenancy.agency_context(agent.agency_id):
        approval = Approval.objects.get(execution=execution)
        approval_decide(approval=approval, approve=True, user_id=None, reason="ok")
    execution = wait_for(execution)

    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    assert execution.output == "E-mail is switched off."
    assert "module_disabled" in json.dumps(
        fake_llm_server.requests_for(agent.llm_model)[-1].tool_results
    )
    assert _calls(execution) == [("email_send", "denied", "module_disabled")]
    with tenancy.agency_context(agent.agency_id):
        assert not EmailMessage.objects.filter(execution=execution).exists()


@pytest.mark.slow
def test_a_redis_outage_refuses_the_rate_limited_call_and_the_run_goes_on(
    settings: Settings,
    probe_tool: str,
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
) -> None:
    agent = make_agent("openai", allowed_tools=["acme_*"])
    ToolFactory.create(agency=agent.agency, name=probe_tool, rate_limit_per_minute=5)
    fake_llm_server.set_responder(
        by_turn(tool_call_reply(probe_tool, {}), text_reply("Could not check the limit.")),
        key=agent.llm_model,
    )
    with tenancy.agency_context(agent.agency_id):
        execution = Execution.objects.create(
            agency_id=agent.agency_id, agent=agent, site_id=agent.site_id,
            trigger_type="manual", input="Probe.",
        )  # fmt: skip
    # Only the rate limiter reads REDIS_URL at call time; nothing listens on port 1.
    settings.REDIS_URL = "redis://127.0.0.1:1/0"

    assert run_execution(execution.id, agency_id=agent.agency_id) == ExecutionStatus.COMPLETED
    with tenancy.agency_context(agent.agency_id):
        execution.refresh_from_db()
    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    assert execution.output == "Could not check the limit."
    assert "rate_limit_unavailable" in json.dumps(
        fake_llm_server.requests_for(agent.llm_model)[1].tool_results
    )
    assert _calls(execution) == [(probe_tool, "failed", "rate_limit_unavailable")]
