"""The runtime's plugin port (agents/runtime/plugins.py) through a real Celery worker: a plugin
added by settings alone (the worker's AGENTDESK_RUN_PLUGINS) sees every hook in the documented
order, and its verdicts park and finish the run as the built-in features' do."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings

from agents.models import Agent, Execution, ExecutionStatus, StopReason
from agents.runtime import plugins
from agents.services import execution_cancel, execution_create
from core import tenancy
from crm.models import Contact
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import by_turn, text_reply, tool_call_reply
from tests.processes import Worker, wait_for

PROBE = "tests.agents.runtime.probe_plugin.ProbePlugin"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def probe_worker(
    django_db_setup: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Worker, Path]]:
    log = tmp_path_factory.mktemp("probe") / "hooks.jsonl"
    log.touch()
    queue = f"probe-{uuid.uuid4().hex[:8]}"
    # First in the list: its verdicts and cancel reason come before the built-in plugins'.
    worker = Worker(
        queue=queue,
        concurrency=2,
        AGENTDESK_RUN_PLUGINS=",".join([PROBE, *settings.AGENTDESK_RUN_PLUGINS]),
        AGENTDESK_PROBE_LOG=str(log),
    ).start()
    yield worker, log
    worker.stop()


def _hooks(log: Path, execution: Execution) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    return [line for line in lines if line["execution"] == str(execution.pk)]


def _run(agent: Agent, worker: Worker, text: str, statuses: set[str] | None = None) -> Execution:
    with tenancy.agency_context(agent.agency_id):
        Contact.objects.create(
            agency_id=agent.agency_id, first_name="Ada", last_name="L", email="ada@example.com"
        )
        execution = execution_create(agent=agent, input=text, queue=worker.queue)
    assert execution is not None
    return wait_for(execution, statuses) if statuses else wait_for(execution)


def _script(server: FakeProviderServer, agent: Agent) -> None:
    server.set_responder(
        by_turn(
            tool_call_reply("crm_get_contact", {"email": "ada@example.com"}),
            text_reply("Ada is in the CRM."),
        ),
        key=agent.llm_model,
    )


def test_a_plugin_added_by_settings_sees_every_hook_in_order(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    probe_worker: tuple[Worker, Path],
) -> None:
    worker, log = probe_worker
    agent = make_agent(allowed_tools=["crm_*"])
    _script(fake_llm_server, agent)

    execution = _run(agent, worker, "Is Ada in the CRM?")

    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    assert [h["hook"] for h in _hooks(log, execution)] == [
        "setup",
        "snapshot",
        "started",
        "before_step",
        "before_model_call",
        "reply_persisted",
        "reply_checked",
        "tool_settled",
        "tool_result",
        "after_tool_step",
        "before_step",
        "before_model_call",
        "reply_persisted",
    ]
    # What tool_result returned is what the model was shown.
    shown = fake_llm_server.requests_for(agent.llm_model)[1].tool_results
    assert '"probe": "seen"' in shown[0]


def test_a_plugins_park_verdict_parks_the_run_and_its_parked_hook_follows(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    probe_worker: tuple[Worker, Path],
) -> None:
    worker, log = probe_worker
    agent = make_agent(allowed_tools=["crm_*"])
    _script(fake_llm_server, agent)

    execution = _run(agent, worker, "[probe-park] Is Ada there?", {ExecutionStatus.WAITING_INPUT})

    assert execution.input_request == {"kind": "probe", "tool": "crm_get_contact"}
    assert execution.lease_owner == ""
    assert [h["hook"] for h in _hooks(log, execution)][-2:] == ["after_tool_step", "parked"]
    assert _hooks(log, execution)[-1]["status"] == ExecutionStatus.WAITING_INPUT
    assert len(fake_llm_server.requests_for(agent.llm_model)) == 1
    with tenancy.agency_context(agent.agency_id):
        execution_cancel(execution=execution)


def test_a_plugins_finish_verdict_ends_the_run_before_its_model_call(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    probe_worker: tuple[Worker, Path],
) -> None:
    worker, log = probe_worker
    agent = make_agent(allowed_tools=["crm_*"])
    _script(fake_llm_server, agent)

    execution = _run(agent, worker, "[probe-finish] Is Ada there?")

    assert execution.status == ExecutionStatus.FAILED
    assert execution.stop_reason == StopReason.TOOL_FAILURES
    assert execution.error == "probe: finished"
    assert len(fake_llm_server.requests_for(agent.llm_model)) == 1  # the second never went out
    assert [h["hook"] for h in _hooks(log, execution)][-1] == "before_model_call"


def test_a_plugins_consult_is_a_model_call_paid_recorded_and_its_verdict_applied(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    probe_worker: tuple[Worker, Path],
) -> None:
    worker, log = probe_worker
    agent = make_agent(allowed_tools=["crm_*"])
    fake_llm_server.set_responder(
        lambda request: text_reply("Ada is there.", input_tokens=40, output_tokens=7),
        key=agent.llm_model,
    )

    execution = _run(agent, worker, "[probe-consult] Is Ada there?")

    assert (execution.status, execution.error) == (ExecutionStatus.FAILED, "probe: consulted")
    [request] = fake_llm_server.requests_for(agent.llm_model)  # the step's call never went out
    assert request.tool_names == []  # sent without tools
    assert request.system == "probe: consult"
    assert (execution.llm_call_count, execution.tokens_input, execution.tokens_output) == (1, 40, 7)
    with tenancy.agency_context(agent.agency_id):
        step = execution.steps.get(step_type="reflect")
    assert step.output_text == "probe: Ada is there."
    recorded = step.llm_response or {}
    assert recorded["probe"] == "Ada is there."
    assert recorded["usage"]["input_tokens"] == 40
    assert (step.tokens_input, step.tokens_output) == (40, 7)
    assert [h["hook"] for h in _hooks(log, execution)][-2:] == ["before_step", "before_model_call"]


def test_a_plugin_gives_the_reason_of_a_cancel(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    probe_worker: tuple[Worker, Path],
) -> None:
    worker, log = probe_worker
    agent = make_agent(allowed_tools=["crm_*"])
    _script(fake_llm_server, agent)

    execution = _run(agent, worker, "[probe-cancel] Is Ada there?")

    assert execution.status == ExecutionStatus.CANCELLED
    assert execution.error == "probe: cancelled"
    hooks = [h["hook"] for h in _hooks(log, execution)]
    # (the cancel comes back with the tool step's commit, collected before the model call)
    assert hooks[-1] == "cancel_reason"
    assert "after_tool_step" in hooks
    assert len(fake_llm_server.requests_for(agent.llm_model)) == 1


class _Quiet(plugins.RunPlugin):
    def parked(self, status: str) -> None: ...


class _Settles(plugins.RunPlugin):
    @classmethod
    def setup(cls, setup: plugins.RunSetup) -> None: ...


def test_hooks_not_overridden_are_left_out_once_at_load() -> None:
    quiet, settles = f"{__name__}._Quiet", f"{__name__}._Settles"
    with override_settings(AGENTDESK_RUN_PLUGINS=[quiet, settles]):
        loaded = plugins.plugins()
        assert plugins.plugins() is loaded  # loaded once
    assert loaded.hooks["parked"] == (_Quiet,)
    assert loaded.hooks["setup"] == (_Settles,)
    assert loaded.hooks["after_tool_step"] == ()
    assert loaded.per_run == (_Quiet,)  # a class with only setup hooks is never instantiated


class _ChoosesVersion(plugins.RunPlugin):
    chosen: uuid.UUID | None = None

    @classmethod
    def version(cls, execution: Execution) -> uuid.UUID | None:
        return cls.chosen


def test_a_run_starts_on_the_version_a_plugin_chooses_or_it_was_created_on(
    make_agent: Callable[..., Agent],
) -> None:
    from agents.runtime.setup import build_snapshot
    from agents.services.agents import agent_update

    agent = make_agent()
    with tenancy.agency_context(agent.agency_id):
        agent_update(agent=agent, system_prompt="You are version one.", allowed_tools=["crm_*"])
        first = agent.current_version_id
        agent_update(agent=agent, system_prompt="You are version two.", allowed_tools=["note_*"])
        second = agent.current_version_id
        assert first is not None
        assert second != first

        def snapshot(execution: Execution) -> tuple[str, list[str], uuid.UUID | None]:
            fresh = Agent.objects.get(pk=agent.pk)
            taken = build_snapshot(fresh, execution)
            names = sorted(tool["name"] for tool in taken["tools"])
            return taken["system_prompt"], names, execution.agent_version_id

        chooser = f"{__name__}._ChoosesVersion"
        with override_settings(AGENTDESK_RUN_PLUGINS=[chooser]):
            _ChoosesVersion.chosen = first
            prompt, tools, version = snapshot(Execution(agent=agent, agency_id=agent.agency_id))
            assert "version one" in prompt
            assert version == first
            assert tools
            assert all(name.startswith("crm_") for name in tools)
            # Created on a version: the plugin is not asked.
            created_on = Execution(agent=agent, agency_id=agent.agency_id, agent_version_id=second)
            prompt, tools, version = snapshot(created_on)
            assert "version two" in prompt
            assert version == second
            _ChoosesVersion.chosen = None  # nobody chooses: the current version
            prompt, _, version = snapshot(Execution(agent=agent, agency_id=agent.agency_id))
            assert "version two" in prompt
            assert version == second
