"""AgentDesk's MCP server (/mcp, protocols/mcp/) driven by the official SDK's client over
streamable HTTP, against the real ASGI application under uvicorn, a real Celery worker and the
fake provider server: the agency's agents as tools, a call's result, a run that waits for an
approval, the execution resources, another agency's key, a revoked key, bad arguments, and a
wait capped by AGENTDESK_MCP_WAIT_SECONDS."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import httpx
import pytest

from agents.models import Agent, Execution, ExecutionStatus
from approvals.models import RiskLevel, RiskRule
from approvals.risk import clear_cache
from core import tenancy
from core.api_keys.services import api_key_create, api_key_revoke
from core.models import ApiKey, Role
from crm.models import Contact
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import by_turn, text_reply, tool_call_reply
from tests.processes import AsgiServer, Worker, wait_for

pytestmark = pytest.mark.slow
WAIT_LIMIT = 30  # AGENTDESK_MCP_WAIT_SECONDS of this module's server (a loaded machine)


@pytest.fixture(scope="module")
def mcp_url(django_db_setup: None) -> Iterator[str]:
    server = AsgiServer(AGENTDESK_MCP_WAIT_SECONDS=str(WAIT_LIMIT)).start()
    yield f"{server.url}/mcp"
    server.stop()


def _key(agent: Agent, role: str = Role.STAFF) -> tuple[ApiKey, str]:
    with tenancy.agency_context(agent.agency_id):
        return api_key_create(agency_id=agent.agency_id, name=f"mcp {role}", role=role)


def _mcp[T](url: str, key: str, work: Callable[[Any], Awaitable[T]]) -> T:
    """``work(client)`` in one session of the SDK's client with ``key`` in its header."""

    async def session() -> T:
        import httpx2
        from mcp.client import Client
        from mcp.client.streamable_http import streamable_http_client

        headers = {"Authorization": f"Bearer {key}"}
        async with httpx2.AsyncClient(headers=headers, timeout=90) as http:
            transport = streamable_http_client(url, http_client=http)
            async with Client(transport, cache=None, read_timeout_seconds=90) as client:
                return await work(client)

    try:
        return asyncio.run(session())
    except BaseExceptionGroup as group:  # the client's task group: raise what failed in it
        first: BaseException = group
        while isinstance(first, BaseExceptionGroup):
            first = first.exceptions[0]
        raise first from None


def _call(url: str, key: str, name: str, arguments: dict[str, Any]) -> Any:
    return _mcp(url, key, lambda c: c.call_tool(name, arguments))


def _read(url: str, key: str, uri: str) -> dict[str, Any]:
    result = _mcp(url, key, lambda c: c.read_resource(uri))
    return json.loads(result.contents[0].text)


def _read_error(url: str, key: str, uri: str) -> str:
    from mcp.shared.exceptions import MCPError

    with pytest.raises(MCPError) as refused:
        _read(url, key, uri)
    return refused.value.message


def _tool_names(url: str, key: str) -> list[str]:
    return [tool.name for tool in _mcp(url, key, lambda c: c.list_tools()).tools]


@pytest.fixture
def agent(make_agent: Callable[..., Agent], fake_llm_server: FakeProviderServer) -> Agent:
    agent = make_agent(description="Answers questions about the agency's clients.")
    fake_llm_server.set_responder(
        by_turn(text_reply("Ada Lovelace renewed on 3 March.")), key=agent.llm_model
    )
    return agent


def test_the_agents_are_tools_and_a_call_returns_the_runs_output(
    mcp_url: str, agent: Agent, make_agent: Callable[..., Agent], celery_worker: Worker
) -> None:
    _, key = _key(agent)
    with tenancy.agency_context(agent.agency_id):
        Agent.objects.create(  # inactive: not offered
            agency_id=agent.agency_id, site_id=agent.site_id, name="Off", slug="off",
            agent_type=agent.agent_type, system_prompt="-", is_active=False,
        )  # fmt: skip

    tools = _mcp(mcp_url, key, lambda c: c.list_tools()).tools

    assert [t.name for t in tools] == [agent.slug]
    assert tools[0].description == "Answers questions about the agency's clients."
    schema = tools[0].input_schema
    assert schema["required"] == ["input"]
    assert set(schema["properties"]) == {"input", "data", "wait_seconds"}

    result = _call(mcp_url, key, agent.slug, {"input": "When did Ada renew?", "data": {"n": 1}})

    assert not result.is_error, result.content
    assert result.content[0].text == "Ada Lovelace renewed on 3 March."
    assert result.structured_content["status"] == "completed"
    with tenancy.agency_context(agent.agency_id):
        execution = Execution.objects.get(pk=result.structured_content["execution_id"])
    assert execution.agent_id == agent.id
    assert execution.input == "When did Ada renew?"
    assert execution.trigger_data == {"n": 1, "_via": "mcp"}
    # The run as a resource: its status and output.
    read = _read(mcp_url, key, f"agentdesk://executions/{execution.id}")
    assert read["status"] == "completed"
    assert read["output"] == "Ada Lovelace renewed on 3 March."
    templates = _mcp(mcp_url, key, lambda c: c.list_resource_templates()).resource_templates
    assert [t.uri_template for t in templates] == ["agentdesk://executions/{execution_id}"]
    listed = _mcp(mcp_url, key, lambda c: c.list_resources()).resources
    assert [str(r.uri) for r in listed] == [f"agentdesk://executions/{execution.id}"]


def test_a_run_that_needs_an_approval_answers_with_its_id_and_status(
    mcp_url: str,
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = make_agent(allowed_tools=["crm_add_note"])
    with tenancy.agency_context(agent.agency_id):
        contact = Contact.objects.create(agency_id=agent.agency_id, first_name="Ada")
        RiskRule.objects.create(
            agency_id=agent.agency_id, name="Notes need a look", tool_pattern="crm_add_note",
            risk_level=RiskLevel.HIGH, requires_approval=True,
        )  # fmt: skip
    clear_cache()
    note = {"contact_id": str(contact.id), "content": "Renewal agreed."}
    fake_llm_server.set_responder(
        by_turn(tool_call_reply("crm_add_note", note), text_reply("Noted.")), key=agent.llm_model
    )
    _, key = _key(agent)

    result = _call(mcp_url, key, agent.slug, {"input": "Note Ada's renewal."})

    assert not result.is_error, result.content
    data = result.structured_content
    assert data["status"] == ExecutionStatus.WAITING_APPROVAL
    execution_id = data["execution_id"]
    assert execution_id in result.content[0].text
    assert _read(mcp_url, key, data["resource"])["status"] == ExecutionStatus.WAITING_APPROVAL


def test_another_agencys_key_sees_its_own_agents_and_none_of_the_first_agencys_runs(
    mcp_url: str, agent: Agent, make_agent: Callable[..., Agent], celery_worker: Worker
) -> None:
    _, key_a = _key(agent)
    run = _call(mcp_url, key_a, agent.slug, {"input": "When did Ada renew?"})
    uri_a = run.structured_content["resource"]
    other = make_agent()
    _, key_b = _key(other)

    assert _tool_names(mcp_url, key_b) == [other.slug]
    # A's agent is refused like a made-up one...
    refused = _call(mcp_url, key_b, agent.slug, {"input": "Hi"})
    made_up = _call(mcp_url, key_b, "no-such-agent", {"input": "Hi"})
    assert refused.is_error
    assert made_up.is_error
    assert refused.content[0].text == made_up.content[0].text.replace("no-such-agent", agent.slug)
    # ...and so is A's run.
    made_up_uri = f"agentdesk://executions/{uuid.uuid4()}"
    assert _read_error(mcp_url, key_b, uri_a) == f"Resource not found: {uri_a}"
    assert _read_error(mcp_url, key_b, made_up_uri) == f"Resource not found: {made_up_uri}"
    assert _read_error(mcp_url, key_b, "agentdesk://executions/nope") == (
        "Resource not found: agentdesk://executions/nope"
    )
    assert _mcp(mcp_url, key_b, lambda c: c.list_resources()).resources == []
    with tenancy.agency_context(other.agency_id):
        assert not Execution.objects.filter(agent=agent).exists()


def test_a_key_is_checked_on_every_request_and_a_reading_role_runs_nothing(
    mcp_url: str, agent: Agent
) -> None:
    row, key = _key(agent)
    assert _tool_names(mcp_url, key) == [agent.slug]
    with tenancy.agency_context(agent.agency_id):
        api_key_revoke(api_key=row)

    from mcp.shared.exceptions import MCPError

    with pytest.raises(MCPError) as refused:  # the SDK reads the 401's JSON-RPC error
        _tool_names(mcp_url, key)
    assert refused.value.message == "This API key has been revoked."
    initialize = {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "t", "version": "1"}},
    }  # fmt: skip
    accept = {"Accept": "application/json, text/event-stream"}
    answer = httpx.post(mcp_url, json=initialize, headers={**accept, "X-API-Key": key})
    assert answer.status_code == 401
    assert answer.json()["error"]["message"] == "This API key has been revoked."
    answer = httpx.post(mcp_url, json=initialize, headers=accept)
    assert answer.status_code == 401
    assert "An API key is required" in answer.json()["error"]["message"]

    _, viewer = _key(agent, Role.VIEWER)
    assert _tool_names(mcp_url, viewer) == []
    assert _call(mcp_url, viewer, agent.slug, {"input": "Hi"}).is_error


def _assert_refused(
    url: str, key: str, agent: Agent, cases: dict[str, tuple[dict[str, Any], str]]
) -> None:
    """Each call of ``cases`` (arguments, the message expected) is that tool error; no run."""
    for arguments, message in cases.values():
        result = _call(url, key, agent.slug, arguments)
        assert result.is_error
        assert result.content[0].text == message
    with tenancy.agency_context(agent.agency_id):
        assert not Execution.objects.filter(agent=agent).exists()  # nothing started


def test_bad_arguments_are_a_tool_error_that_says_what_is_wrong(mcp_url: str, agent: Agent) -> None:
    _, key = _key(agent)
    cases: dict[str, tuple[dict[str, Any], str]] = {
        "missing": ({}, "Invalid arguments: 'input' is a required property"),
        "type": ({"input": 5}, "Invalid arguments: input: 5 is not of type 'string'"),
        "unknown": (
            {"input": "Hi", "agency": "x"},
            "Invalid arguments: Additional properties are not allowed ('agency' was unexpected)",
        ),
        "wait": (
            {"input": "Hi", "wait_seconds": -1},
            "Invalid arguments: wait_seconds: -1 is less than the minimum of 0",
        ),
    }
    _assert_refused(mcp_url, key, agent, cases)


def test_a_call_waits_at_most_the_configured_time_then_answers_with_the_running_run(
    django_db_setup: None,
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    # A model slower than the limit, well within the worker's model timeout (10 s).
    agent = make_agent()
    fake_llm_server.set_responder(by_turn(text_reply("Late.", latency=6)), key=agent.llm_model)
    _, key = _key(agent)
    server = AsgiServer(AGENTDESK_MCP_WAIT_SECONDS="1").start()
    try:
        url = f"{server.url}/mcp"
        result = _call(url, key, agent.slug, {"input": "Hi", "wait_seconds": 3600})

        assert not result.is_error, result.content
        assert result.structured_content["status"] in {"pending", "running"}
        assert "still" in result.content[0].text
        with tenancy.agency_context(agent.agency_id):
            execution = Execution.objects.get(pk=result.structured_content["execution_id"])
        assert wait_for(execution, timeout=90).status == ExecutionStatus.COMPLETED
        assert _read(url, key, result.structured_content["resource"])["output"] == "Late."
    finally:
        server.stop()


INPUTS = {
    "type": "object",
    "properties": {
        "client": {"type": "string", "description": "The client's name."},
        "year": {"type": "integer", "minimum": 2000},
    },
    "required": ["client"],
    "additionalProperties": False,
}


def test_an_agent_that_declares_inputs_is_a_tool_taking_them_and_its_model_sees_them(
    mcp_url: str,
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = make_agent(input_schema=INPUTS)
    fake_llm_server.set_responder(by_turn(text_reply("Ada renewed.")), key=agent.llm_model)
    _, key = _key(agent)

    (tool,) = _mcp(mcp_url, key, lambda c: c.list_tools()).tools

    assert tool.input_schema["required"] == ["client"]
    assert set(tool.input_schema["properties"]) == {"client", "year", "input", "wait_seconds"}
    assert tool.input_schema["properties"]["client"]["description"] == "The client's name."
    refused: dict[str, tuple[dict[str, Any], str]] = {
        "missing": ({"year": 2025}, "Invalid arguments: 'client' is a required property"),
        "type": (
            {"client": "Ada", "year": "2025"},
            "Invalid arguments: year: '2025' is not of type 'integer'",
        ),
        "unknown": (
            {"client": "Ada", "data": {}},
            "Invalid arguments: Additional properties are not allowed ('data' was unexpected)",
        ),
    }
    _assert_refused(mcp_url, key, agent, refused)

    result = _call(mcp_url, key, agent.slug, {"client": "Ada", "year": 2025})

    assert not result.is_error, result.content
    assert result.structured_content["status"] == "completed"
    with tenancy.agency_context(agent.agency_id):
        execution = Execution.objects.get(pk=result.structured_content["execution_id"])
    assert (execution.input, execution.trigger_data) == (
        "",
        {"client": "Ada", "year": 2025, "_via": "mcp"},
    )
    # With an instruction beside them, the model is given both (the platform's _via is not).
    result = _call(mcp_url, key, agent.slug, {"client": "Ada", "input": "Only renewals."})
    assert not result.is_error, result.content
    first_user = [
        m["content"]
        for r in fake_llm_server.requests_for(agent.llm_model)
        for m in r.body["messages"]
        if m["role"] == "user"
    ][-1]
    assert first_user == 'Only renewals.\n\nInputs:\n{\n "client": "Ada"\n}'
