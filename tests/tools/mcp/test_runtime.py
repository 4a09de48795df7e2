"""MCP tools in real runs: the Celery worker, PostgreSQL, Redis, the fake provider server and the
test MCP server on 127.0.0.1. The runtime offers and calls them through the same executor as the
built-in tools: allow/deny patterns, JSON Schema validation, approvals, rate limits, ToolCall
records; every failure is a tool error the model sees and the run goes on."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agents.models import Agent, Execution, ExecutionStatus
from agents.services import execution_create
from approvals.models import Approval
from approvals.services import approval_decide
from core import tenancy
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import by_turn, text_reply, tool_call_reply
from tests.processes import Worker, wait_for
from tests.tools.mcp.conftest import register
from tests.tools.mcp.server import McpTestServer
from tools.mcp.models import McpAllowedAddress, McpServer
from tools.mcp.services.discovery import mcp_server_refresh
from tools.models import Tool, ToolCall

pytestmark = pytest.mark.slow


@pytest.fixture
def allowed_live(live_db: None, mcp_test_server: McpTestServer) -> Iterator[McpAllowedAddress]:
    """The superuser's allow-list entry, committed so that the worker sees it."""
    row = McpAllowedAddress.objects.create(network="127.0.0.1/32", port=mcp_test_server.port)
    yield row
    McpAllowedAddress.objects.filter(pk=row.pk).delete()


def _registered(agent: Agent, server: McpTestServer, **fields: Any) -> McpServer:
    registered = register(agent.agency, server, **fields)
    with tenancy.agency_context(agent.agency_id):
        assert mcp_server_refresh(server=registered).ok
    return registered


def _start(agent: Agent, text: str = "Use your tools.") -> Execution:
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


def _told(fake: FakeProviderServer, agent: Agent, turn: int) -> str:
    return " ".join(fake.requests_for(agent.llm_model)[turn].tool_results)


def test_an_agent_calls_an_mcp_tool_through_the_worker_and_a_denied_one_is_refused(
    allowed_live: McpAllowedAddress,
    mcp_test_server: McpTestServer,
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = make_agent("openai", allowed_tools=["mcp_*"], denied_tools=["mcp_*__secret_*"])
    server = _registered(agent, mcp_test_server)
    add, secret = f"mcp_{server.slug}__add", f"mcp_{server.slug}__secret_action"
    fake_llm_server.set_responder(
        by_turn(
            tool_call_reply(add, {"a": 2, "b": 3}),
            tool_call_reply(secret, {}),
            text_reply("2 + 3 = 5."),
        ),
        key=agent.llm_model,
    )

    execution = wait_for(_start(agent))

    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    assert execution.output == "2 + 3 = 5."
    offered = fake_llm_server.requests_for(agent.llm_model)[0].tool_names
    assert add in offered
    assert secret not in offered  # denied like any tool: never offered
    assert "crm_get_contact" not in offered  # only mcp_* is allowed
    assert '"sum": 5' in _told(fake_llm_server, agent, 1)
    assert "tool_not_allowed" in _told(fake_llm_server, agent, 2)
    assert _calls(execution) == [(add, "completed", ""), (secret, "denied", "tool_not_allowed")]
    with tenancy.agency_context(agent.agency_id):
        call = ToolCall.objects.get(execution=execution, tool_name=add)
        assert call.output == {"result": {"sum": 5}}
        assert call.input == {"a": 2, "b": 3}
        assert call.tool_id == Tool.objects.get(name=add).pk


def test_mcp_failures_are_tool_errors_the_model_sees_and_the_run_goes_on(
    allowed_live: McpAllowedAddress,
    mcp_test_server: McpTestServer,
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = make_agent("anthropic", allowed_tools=["mcp_*"])
    server = _registered(agent, mcp_test_server, timeout_seconds=4)
    prefix = f"mcp_{server.slug}__"
    fake_llm_server.set_responder(
        by_turn(
            tool_call_reply(prefix + "fail", {"reason": "boom"}),  # the tool reports an error
            tool_call_reply(prefix + "add", {"a": "two"}),  # refused by the stored schema
            tool_call_reply(prefix + "slow", {"seconds": 30}),  # over the server's 4 s
            text_reply("Nothing worked."),
        ),
        key=agent.llm_model,
    )

    execution = wait_for(_start(agent))

    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    assert execution.output == "Nothing worked."
    assert _calls(execution) == [
        (prefix + "fail", "failed", "tool_error"),
        (prefix + "add", "failed", "invalid_arguments"),
        (prefix + "slow", "failed", "timeout"),
    ]
    assert "boom" in _told(fake_llm_server, agent, 1)
    assert "invalid_arguments" in _told(fake_llm_server, agent, 2)
    assert "did not answer within 4 s" in _told(fake_llm_server, agent, 3)


def test_a_call_to_an_address_no_longer_allow_listed_is_refused(
    allowed_live: McpAllowedAddress,
    mcp_test_server: McpTestServer,
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = make_agent("openai", allowed_tools=["mcp_*"])
    server = _registered(agent, mcp_test_server)
    add = f"mcp_{server.slug}__add"
    McpAllowedAddress.objects.filter(pk=allowed_live.pk).delete()  # the superuser takes it back
    fake_llm_server.set_responder(
        by_turn(tool_call_reply(add, {"a": 1, "b": 1}), text_reply("Refused.")),
        key=agent.llm_model,
    )

    execution = wait_for(_start(agent))

    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    assert _calls(execution) == [(add, "failed", "blocked_address")]
    assert "loopback" in _told(fake_llm_server, agent, 1)


def test_an_mcp_tool_that_requires_approval_waits_and_runs_once_approved(
    allowed_live: McpAllowedAddress,
    mcp_test_server: McpTestServer,
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = make_agent("openai", allowed_tools=["mcp_*"])
    server = _registered(agent, mcp_test_server, require_approval=True, rate_limit_per_hour=1)
    add = f"mcp_{server.slug}__add"
    fake_llm_server.set_responder(
        by_turn(
            tool_call_reply(add, {"a": 20, "b": 22}),
            tool_call_reply(add, {"a": 1, "b": 1}),  # over the limit of 1 an hour
            text_reply("42."),
        ),
        key=agent.llm_model,
    )

    execution = wait_for(_start(agent), {"waiting_approval"})
    assert _calls(execution) == [(add, "waiting_approval", "")]
    with tenancy.agency_context(agent.agency_id):
        approval = Approval.objects.get(execution=execution)
        assert approval.action_type == add
        approval_decide(approval=approval, approve=True, user_id=None, reason="fine")
    execution = wait_for(execution)

    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    assert '"sum": 42' in _told(fake_llm_server, agent, 1)
    assert "rate_limited" in _told(fake_llm_server, agent, 2)
    assert _calls(execution) == [(add, "completed", ""), (add, "failed", "rate_limited")]
