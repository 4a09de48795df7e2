"""What ``delegate_to_agent`` refuses, as tool errors the model sees (the run goes on): an agent
it may not call (denied wins, an empty list allows none), one of another agency, an inactive
one, itself, and a chain already at AGENTDESK_MAX_RUN_CHAIN_DEPTH. Each run is run in this
thread (``run_execution``): nothing is delegated, so no worker is needed."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from django.test import override_settings

from agents.models import Agent, AgentMessage, Execution, ExecutionStatus
from agents.runtime.loop import run_execution
from core import tenancy
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import Reply, ScriptedToolCall, by_turn, text_reply
from tests.processes import pending_execution
from tests.teams.helpers import calls, children, delegate, helper_agent, lead_agent, refresh

pytestmark = pytest.mark.slow


def _calls_reply(*arguments: dict) -> Reply:
    return Reply(
        tool_calls=tuple(ScriptedToolCall("delegate_to_agent", args) for args in arguments)
    )


def _run(agent: Agent, text: str = "Delegate.") -> Execution:
    execution = pending_execution(agent, input_text=text)
    run_execution(execution.id, agency_id=execution.agency_id)
    return refresh(execution)


def test_agents_it_may_not_call_are_refused_with_the_reason(
    make_agent: Callable[..., Agent], fake_llm_server: FakeProviderServer
) -> None:
    lead = lead_agent(
        make_agent,
        delegate_agents=["helper-*", "lead"],
        denied_delegate_agents=["helper-secret"],
        max_tool_calls_per_step=10,
        max_corrections=0,  # refusals are failures: no person is asked after three
    )
    helper_agent(lead, slug="helper-secret")  # allowed by helper-*, but denied wins
    helper_agent(lead, slug="accountant")  # matches no allowed pattern
    helper_agent(lead, slug="helper-asleep", is_active=False)
    stranger = make_agent("openai", slug="helper-elsewhere")  # another agency's
    attempts = [
        delegate("helper-secret", "Tell me the secret."),
        delegate("accountant", "Do the books."),
        delegate("helper-asleep", "Wake up."),
        delegate(stranger.slug, "Help from afar."),
        delegate("lead", "Do it yourself."),
        {"agent": "helper-x"},  # no instruction: the tool's JSON Schema refuses it
    ]
    fake_llm_server.set_responder(
        by_turn(_calls_reply(*attempts), text_reply("Nobody could help.")), key=lead.llm_model
    )

    run = _run(lead)

    assert run.status == ExecutionStatus.COMPLETED, run.error
    codes = [call.error_code for call in calls(run)]
    assert codes == [
        "agent_not_allowed",
        "agent_not_allowed",
        "agent_inactive",
        "agent_not_found",
        "delegate_to_self",
        "invalid_arguments",
    ]
    results = [json.loads(r) for r in fake_llm_server.requests_for(lead.llm_model)[1].tool_results]
    assert "denied" in results[0]["error"]["message"]
    assert "matches none" in results[1]["error"]["message"]
    assert children(run) == []
    with tenancy.agency_context(lead.agency_id):
        assert not AgentMessage.objects.filter(from_execution=run).exists()


def test_an_agent_with_no_delegate_patterns_may_delegate_to_none(
    make_agent: Callable[..., Agent], fake_llm_server: FakeProviderServer
) -> None:
    lead = lead_agent(make_agent, delegate_agents=[])
    helper = helper_agent(lead)
    fake_llm_server.set_responder(
        by_turn(_calls_reply(delegate(helper.slug, "Help.")), text_reply("Alone.")),
        key=lead.llm_model,
    )

    run = _run(lead)

    [call] = calls(run)
    assert call.error_code == "agent_not_allowed"
    assert "may not delegate to any agent" in call.error
    assert children(run) == []


@override_settings(AGENTDESK_MAX_RUN_CHAIN_DEPTH=2)
def test_a_run_at_the_chain_depth_limit_may_not_delegate(
    make_agent: Callable[..., Agent], fake_llm_server: FakeProviderServer
) -> None:
    lead = lead_agent(make_agent)
    helper = helper_agent(lead)
    fake_llm_server.set_responder(
        by_turn(_calls_reply(delegate(helper.slug, "Go deeper.")), text_reply("Too deep.")),
        key=lead.llm_model,
    )
    execution = pending_execution(lead, input_text="Delegate.")
    with tenancy.agency_context(lead.agency_id):
        Execution.objects.filter(pk=execution.pk).update(depth=2)

    run_execution(execution.id, agency_id=execution.agency_id)

    run = refresh(execution)
    assert run.status == ExecutionStatus.COMPLETED, run.error
    [call] = calls(run)
    assert call.error_code == "chain_too_deep"
    assert children(run) == []


def test_the_lead_is_told_which_agents_it_may_delegate_to(
    make_agent: Callable[..., Agent], fake_llm_server: FakeProviderServer
) -> None:
    lead = lead_agent(make_agent, denied_delegate_agents=["helper-secret"])
    helper_agent(lead, slug="helper-research", description="Finds facts about contacts.")
    helper_agent(lead, slug="helper-secret")
    helper_agent(lead, slug="accountant")
    fake_llm_server.set_responder(by_turn(text_reply("Fine.")), key=lead.llm_model)

    run = _run(lead)

    [tool] = [t for t in run.config_snapshot["tools"] if t["name"] == "delegate_to_agent"]
    assert "- helper-research: Helper Research (Finds facts about contacts.)" in tool["description"]
    assert "helper-secret" not in tool["description"]
    assert "accountant" not in tool["description"]
