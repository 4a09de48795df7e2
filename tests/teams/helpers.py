"""A team for the delegation tests: a lead agent (of a fresh agency, on the fake provider) and
helpers of the same agency, each with its own model name so each gets its own script."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

from agents.models import Agent, AgentMessage, Execution
from agents.services import execution_create
from core import tenancy
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import RecordedRequest, Step, text_reply
from tests.agents.factories import AgentFactory
from tools.models import ToolCall


def lead_agent(make_agent: Callable[..., Agent], **fields: Any) -> Agent:
    defaults: dict[str, Any] = {
        "slug": "lead",
        "allowed_tools": ["delegate_to_agent", "crm_search_contacts", "wait"],
        "delegate_agents": ["helper-*"],
    }
    defaults.update(fields)
    return make_agent("openai", **defaults)


def helper_agent(lead: Agent, slug: str = "helper-research", **fields: Any) -> Agent:
    defaults: dict[str, Any] = {
        "agency": lead.agency,
        "site": lead.site,
        "slug": slug,
        "name": slug.replace("-", " ").title(),
        "allowed_tools": ["*"],
        "llm_provider": "openai",
        "llm_model": f"fake-{uuid.uuid4().hex[:10]}",
    }
    defaults.update(fields)
    return AgentFactory.create(**defaults)


def delegate(agent: str, instruction: str, input_data: dict[str, Any] | None = None) -> dict:
    arguments: dict[str, Any] = {"agent": agent, "instruction": instruction}
    if input_data is not None:
        arguments["input"] = input_data
    return arguments


def answer_with_result(prefix: str) -> Callable[[RecordedRequest], Step]:
    """A lead's last turn: it answers with what the tool result it got says."""

    def respond(request: RecordedRequest) -> Step:
        result = json.loads(request.tool_results[-1])
        said = result.get("output") or result.get("error", {}).get("code", "")
        return text_reply(f"{prefix} {said}")

    return respond


def start(agent: Agent, text: str, *, queue: str | None = None) -> Execution:
    with tenancy.agency_context(agent.agency_id):
        execution = execution_create(agent=agent, input=text, queue=queue)
    assert execution is not None
    return execution


def children(execution: Execution) -> list[Execution]:
    with tenancy.agency_context(execution.agency_id):
        return list(Execution.objects.filter(parent=execution).order_by("created_at"))


def messages(execution: Execution) -> list[AgentMessage]:
    with tenancy.agency_context(execution.agency_id):
        return list(
            AgentMessage.objects.filter(from_execution=execution).order_by("sent_at")
            | AgentMessage.objects.filter(to_execution=execution).order_by("sent_at")
        )


def calls(execution: Execution) -> list[ToolCall]:
    with tenancy.agency_context(execution.agency_id):
        return list(ToolCall.objects.filter(execution=execution).order_by("created_at"))


def refresh(execution: Execution) -> Execution:
    with tenancy.agency_context(execution.agency_id):
        return Execution.objects.get(pk=execution.pk)


__all__ = ["FakeProviderServer"]
