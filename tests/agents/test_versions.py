"""Agent versions: a version per configuration change (and none otherwise), numbered correctly
under concurrent saves, immutable, compared field by field and restored as a new version; and
a run keeps the version it started with to its end, even when the agent is edited mid-run."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from django.db import DatabaseError, IntegrityError, connection, connections, transaction
from django.http import Http404

from agents.models import VERSIONED_FIELDS, Agent, AgentVersion, Execution, ExecutionStatus
from agents.runtime.setup import pinned_agent
from agents.services import (
    agent_activate,
    agent_create,
    agent_create_from_template,
    agent_deactivate,
    agent_duplicate,
    agent_update,
    agent_version_restore,
    execution_create,
)
from agents.services.versions import (
    agent_versions,
    config_of,
    version_diff,
)
from approvals.models import Approval
from approvals.services import approval_decide
from core import tenancy
from core.exceptions import ApplicationError
from core.models import Event, Site
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import text_reply, tool_call_reply
from tests.agents.factories import AgentFactory, AgentTemplateFactory
from tests.factories import AgencyFactory, SiteFactory, UserFactory
from tests.processes import Worker, wait_for

WAIT_LIMIT = 30.0
PROMPT_ONE = "You qualify inbound leads.\nBe brief.\nAlways answer in English."
PROMPT_TWO = "You qualify inbound leads.\nBe thorough.\nAlways answer in English."


@pytest.fixture
def site(db: None) -> Site:
    return SiteFactory.create(agency=AgencyFactory.create())


def _create(site: Site, **fields: Any) -> Agent:
    values: dict[str, Any] = {
        "name": "Lead qualifier",
        "agent_type": "specialist",
        "system_prompt": PROMPT_ONE,
        **fields,
    }
    return agent_create(agency_id=site.agency_id, site=site, **values)


def _numbers(agent: Agent) -> list[int]:
    return list(
        AgentVersion.objects.filter(agent=agent).order_by("number").values_list("number", flat=True)
    )


def _current(agent: Agent) -> AgentVersion:
    agent.refresh_from_db()
    assert agent.current_version is not None
    return agent.current_version


# --- when a version is made ------------------------------------------------------------------


def test_create_makes_version_1_with_the_whole_configuration(site: Site) -> None:
    user = UserFactory.create()
    with tenancy.agency_context(site.agency_id):
        agent = _create(site, temperature=Decimal("0.7"), user_id=user.pk)
        [version] = agent_versions(agent=agent)
        assert _current(agent) == version
    assert version.number == 1
    assert version.change_summary == []
    assert version.created_by_id == user.pk
    assert version.agency_id == site.agency_id
    assert set(version.config) == set(VERSIONED_FIELDS)
    assert version.config["system_prompt"] == PROMPT_ONE
    assert version.config["temperature"] == "0.70"  # one form, whatever form it was given in
    assert version.config == config_of(agent)


def test_each_configuration_edit_makes_a_version_naming_what_changed(site: Site) -> None:
    with tenancy.agency_context(site.agency_id):
        agent = _create(site)
        agent_update(agent=agent, system_prompt=PROMPT_TWO)
        agent_update(agent=agent, llm_model="gpt-4o-mini", allowed_tools=["crm_*"])
        agent_update(agent=agent, max_steps_per_run=4, trigger_events=["crm.contact.created"])
        versions = list(agent_versions(agent=agent))
        updated = Event.objects.filter(event_type="ai.agent.updated").order_by("created_at")
        payload_versions = [event.payload.get("version") for event in updated]
    assert [v.number for v in versions] == [4, 3, 2, 1]
    assert [v.change_summary for v in versions[:3]] == [
        ["trigger_events", "max_steps_per_run"],
        ["llm_model", "allowed_tools"],
        ["system_prompt"],
    ]
    assert versions[0].config["max_steps_per_run"] == 4
    assert versions[1].config["system_prompt"] == PROMPT_TWO
    assert versions[3].config["system_prompt"] == PROMPT_ONE  # version 1 is kept as it was
    assert payload_versions == [2, 3, 4]


def test_saves_that_change_no_configuration_make_no_version(site: Site) -> None:
    with tenancy.agency_context(site.agency_id):
        agent = _create(site, temperature="0.70", capabilities=["triage"])
        # The same values in other forms (a form's Decimal("0.7"), an int as a string).
        agent_update(agent=agent, temperature=Decimal("0.7"), max_tokens="4096")
        agent_update(agent=agent, system_prompt=PROMPT_ONE, capabilities=["triage"])
        # Switches, identity and stats are not configuration.
        agent_activate(agent=agent)
        agent_deactivate(agent=agent)
        agent_update(agent=agent, is_public=True, slug="leads")
        Agent.objects.filter(pk=agent.pk).update(total_runs=5, successful_runs=5)
        agent.refresh_from_db()
        agent_update(agent=agent)  # a save of the stats the runtime wrote
        assert _numbers(agent) == [1]
        assert _current(agent).number == 1


def test_an_agent_without_versions_gets_version_1_at_its_next_save(site: Site) -> None:
    """Agents written outside the services (the shell, a fixture) have none until then."""
    agent = AgentFactory.create(agency=site.agency, site=site)
    with tenancy.agency_context(site.agency_id):
        assert agent.current_version_id is None
        agent_update(agent=agent, is_active=True)
        assert _numbers(agent) == [1]
        assert _current(agent).config == config_of(agent)


def test_duplicates_and_agents_from_templates_start_at_version_1(site: Site) -> None:
    template = AgentTemplateFactory.create(agency=site.agency, system_prompt="From a template.")
    with tenancy.agency_context(site.agency_id):
        agent = _create(site)
        agent_update(agent=agent, system_prompt=PROMPT_TWO)
        copy = agent_duplicate(agent=agent)
        made = agent_create_from_template(template=template, agency_id=site.agency_id, site=site)
        assert _numbers(copy) == [1]
        assert _current(copy).config["system_prompt"] == PROMPT_TWO
        assert _numbers(made) == [1]
        assert _current(made).config["system_prompt"] == "From a template."


def test_a_version_cannot_be_changed_once_written(site: Site) -> None:
    with tenancy.agency_context(site.agency_id):
        version = _current(_create(site))
    for change in ({"config": {"system_prompt": "x"}}, {"number": 7}, {"change_summary": ["name"]}):
        # Each refusal rolls its block back.
        with (
            tenancy.agency_context(site.agency_id),
            pytest.raises(DatabaseError, match="immutable"),
        ):
            AgentVersion.objects.filter(pk=version.pk).update(**change)


def _checked_now(write: Callable[[], object]) -> None:
    write()
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")


def test_the_database_keeps_versions_to_their_own_agent(site: Site) -> None:
    """A run's version and an agent's current version are versions of that agent (composite
    foreign keys, checked at commit: made immediate here)."""
    with tenancy.agency_context(site.agency_id):
        agent = _create(site)
        other = _create(site, name="Other", slug="other")
        theirs = _current(other)
        writes = {
            "agents_execution_version_same_agent": lambda: Execution.objects.create(
                agency_id=site.agency_id,
                agent=agent,
                site=site,
                trigger_type="manual",
                agent_version=theirs,
            ),
            "agents_agent_current_version_own": lambda: Agent.objects.filter(pk=agent.pk).update(
                current_version=theirs
            ),
        }
        for constraint, write in writes.items():
            with pytest.raises(IntegrityError, match=constraint), transaction.atomic():
                _checked_now(write)


def test_versions_of_another_agency_are_invisible(site: Site) -> None:
    other = SiteFactory.create(agency=AgencyFactory.create())
    with tenancy.agency_context(other.agency_id):
        theirs = _create(other)
    with tenancy.agency_context(site.agency_id):
        _create(site)
        assert list(agent_versions(agent=theirs)) == []
        assert AgentVersion.objects.filter(agent_id=theirs.pk).count() == 0
        assert AgentVersion.objects.count() == 1


# --- numbering under concurrency ------------------------------------------------------------------


def _backend_waits_for_a_lock(pid: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid])
        row = cursor.fetchone()
    return row is not None and row[0] == "Lock"


def test_two_saves_at_once_get_consecutive_numbers(live_db: None) -> None:
    """Save A holds its transaction open; save B (another connection, a copy of the agent read
    before A committed) must wait for it and number after it, not beside it."""
    site = SiteFactory.create(agency=AgencyFactory.create())
    with tenancy.agency_context(site.agency_id):
        agent = _create(site)
    b_pid: list[int] = []
    b_result: list[Any] = []

    def save_b() -> None:
        try:
            with tenancy.agency_context(site.agency_id):
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_backend_pid()")
                    b_pid.append(cursor.fetchone()[0])
                stale = Agent.objects.get(pk=agent.pk)
                b_result.append(agent_update(agent=stale, system_prompt="Prompt B."))
        except Exception as exc:  # reported by the main thread
            b_result.append(exc)
        finally:
            connections.close_all()  # this thread's connection

    b = threading.Thread(target=save_b)
    with tenancy.agency_context(site.agency_id):
        agent_update(agent=agent, system_prompt="Prompt A.")
        b.start()
        deadline = time.monotonic() + WAIT_LIMIT
        while not (b_pid and _backend_waits_for_a_lock(b_pid[0])):
            assert b.is_alive(), b_result
            assert time.monotonic() < deadline, "save B never waited for save A"
            time.sleep(0.02)
    # A has committed.
    b.join(WAIT_LIMIT)
    assert not b.is_alive()
    assert not isinstance(b_result[0], Exception), b_result[0]
    with tenancy.agency_context(site.agency_id):
        versions = list(agent_versions(agent=agent))
        current = _current(agent)
    assert [(v.number, v.config["system_prompt"]) for v in versions] == [
        (3, "Prompt B."),
        (2, "Prompt A."),
        (1, PROMPT_ONE),
    ]
    assert current == versions[0]


# --- diff and restore ------------------------------------------------------------------------


def test_the_diff_shows_the_edit_field_by_field(site: Site) -> None:
    with tenancy.agency_context(site.agency_id):
        agent = _create(site)
        agent_update(
            agent=agent,
            system_prompt=PROMPT_TWO,
            temperature="0.20",
            constraints=["Never promise discounts"],
            llm_model="gpt-4o-mini",
            allowed_tools=["crm_*", "email_send"],
        )
        new, old = list(agent_versions(agent=agent))
    changes = {change.name: change for change in version_diff(old.config, new.config)}
    assert list(changes) == [
        "system_prompt", "constraints", "llm_model", "temperature", "allowed_tools",
    ]  # fmt: skip
    assert (changes["llm_model"].label, changes["llm_model"].after) == ("LLM model", "gpt-4o-mini")
    assert (changes["allowed_tools"].before, changes["allowed_tools"].after) == (
        "(none)",
        "crm_*, email_send",
    )
    prompt = changes["system_prompt"]
    assert prompt.label == "System prompt"
    assert [(line.kind, line.text) for line in prompt.lines if line.kind != "hunk"] == [
        ("context", "You qualify inbound leads."),
        ("removed", "Be brief."),
        ("added", "Be thorough."),
        ("context", "Always answer in English."),
    ]
    assert (changes["temperature"].before, changes["temperature"].after) == ("0.70", "0.20")
    assert changes["temperature"].lines == []
    constraints = changes["constraints"]
    assert (constraints.before, constraints.after) == ("(none)", "Never promise discounts")
    assert version_diff(new.config, new.config) == []


def test_restore_makes_a_new_version_with_the_old_configuration(site: Site) -> None:
    user = UserFactory.create()
    with tenancy.agency_context(site.agency_id):
        agent = _create(site, llm_model="gpt-4o")
        agent_update(agent=agent, system_prompt=PROMPT_TWO, llm_model="gpt-4o-mini")
        agent_update(agent=agent, max_tokens=1000)
        first = agent_versions(agent=agent).get(number=1)
        restored = agent_version_restore(agent=agent, version=first, user_id=user.pk)
        agent.refresh_from_db()
        events = list(
            Event.objects.filter(event_type="ai.agent.updated")
            .order_by("-created_at")
            .values_list("payload", flat=True)[:1]
        )
        with pytest.raises(ApplicationError) as again:
            agent_version_restore(agent=agent, version=restored, user_id=user.pk)
        assert _numbers(agent) == [1, 2, 3, 4]
    assert restored.number == 4
    assert restored.restored_from_id == first.pk
    assert restored.created_by_id == user.pk
    assert restored.config == first.config
    assert restored.change_summary == ["system_prompt", "llm_model", "max_tokens"]
    assert (agent.system_prompt, agent.llm_model, agent.max_tokens) == (PROMPT_ONE, "gpt-4o", 4096)
    assert agent.current_version_id == restored.pk
    assert events[0]["version"] == 4
    assert again.value.code == "no_change"
    assert again.value.status == 409


def test_restore_refuses_a_version_of_another_agent(site: Site) -> None:
    with tenancy.agency_context(site.agency_id):
        agent = _create(site)
        other = _create(site, name="Other", slug="other")
        with pytest.raises(Http404):
            agent_version_restore(agent=agent, version=_current(other))


# --- runs keep their version -------------------------------------------------------------------


def test_a_resumed_run_reads_its_version_not_the_edited_agent(
    site: Site, django_assert_num_queries: Any
) -> None:
    approve = {"type": "require_approval", "tools": ["email_*"], "description": "Needs a human"}
    with tenancy.agency_context(site.agency_id):
        agent = _create(site, constraints=[approve], max_corrections=3)
        execution = Execution.objects.create(
            agency_id=site.agency_id,
            agent=agent,
            site=site,
            trigger_type="manual",
            agent_version=_current(agent),
        )
        agent_update(agent=agent, constraints=[], max_corrections=0, system_prompt=PROMPT_TWO)
        edited = Agent.objects.get(pk=agent.pk)
        with django_assert_num_queries(1):
            pinned = pinned_agent(edited, execution)
        assert (pinned.constraints, pinned.max_corrections) == ([approve], 3)
        assert pinned.system_prompt == PROMPT_ONE
        assert pinned.current_version_id == _current(agent).pk  # only the configuration
        # A run on the agent's current version: nothing to read.
        current = Agent.objects.get(pk=agent.pk)
        execution.agent_version_id = current.current_version_id
        with django_assert_num_queries(0):
            assert pinned_agent(current, execution) is current
        assert current.max_corrections == 0


def _system_prompts(server: FakeProviderServer, model: str) -> list[str]:
    return [r.messages[0]["content"] for r in server.requests_for(model)]


@pytest.mark.slow
def test_a_run_started_before_an_edit_finishes_on_its_version(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    """The first model reply is slow; meanwhile the system prompt is edited through the
    service. Every request of the run carries the old prompt, and the run names version 1."""
    agent = make_agent("openai")
    model = agent.llm_model
    with tenancy.agency_context(agent.agency_id):
        agent_update(agent=agent, system_prompt="Prompt one.")  # version 1
    fake_llm_server.script(model).push(
        tool_call_reply("crm_search_contacts", {"query": "ada"}, latency=2.0),
        text_reply("Done."),
    )
    with tenancy.agency_context(agent.agency_id):
        execution = execution_create(agent=agent, input="Find Ada.")
    assert execution is not None
    deadline = time.monotonic() + WAIT_LIMIT
    while not fake_llm_server.requests_for(model):  # claimed, snapshot taken, model asked
        assert time.monotonic() < deadline, "the run never asked its model"
        time.sleep(0.02)
    with tenancy.agency_context(agent.agency_id):
        edited = Agent.objects.get(pk=agent.pk)
        agent_update(agent=edited, system_prompt="Prompt two.")  # version 2, mid-run
        assert _numbers(agent) == [1, 2]

    execution = wait_for(execution)

    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    prompts = _system_prompts(fake_llm_server, model)
    assert len(prompts) == 2  # the reply before the edit's result, and the one after
    assert all(p.startswith("Prompt one.") for p in prompts), prompts
    with tenancy.agency_context(agent.agency_id):
        execution = Execution.objects.select_related("agent_version").get(pk=execution.pk)
        assert execution.agent_version is not None
        assert execution.agent_version.number == 1
    # The next run starts on the edited version.
    fake_llm_server.script(model).push(text_reply("Done again."))
    with tenancy.agency_context(agent.agency_id):
        second = execution_create(agent=Agent.objects.get(pk=agent.pk), input="Again.")
    assert second is not None
    second = wait_for(second)
    with tenancy.agency_context(agent.agency_id):
        number = Execution.objects.get(pk=second.pk).agent_version.number  # type: ignore[union-attr]
    assert number == 2
    assert _system_prompts(fake_llm_server, model)[-1].startswith("Prompt two.")


@pytest.mark.slow
def test_a_run_resumed_after_an_edit_keeps_its_versions_policies(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    """The run waits for an approval; meanwhile the agent gets a constraint that would make its
    next tool call wait too, another model and another prompt. Resumed, the run goes on under
    version 1: its next call runs without approval, on the same model, with the old prompt."""
    approve_email = {"type": "require_approval", "tools": ["email_*"], "description": "E-mail"}
    agent = make_agent("openai", allowed_tools=["email_*", "crm_*"])
    model = agent.llm_model
    with tenancy.agency_context(agent.agency_id):
        agent_update(agent=agent, system_prompt="Prompt one.", constraints=[approve_email])
    fake_llm_server.script(model).push(
        tool_call_reply("email_send", {"to": ["a@example.com"], "subject": "Hi", "body": "Hi"}),
        tool_call_reply("crm_search_contacts", {"query": "ada"}),
        text_reply("Sent and searched."),
    )
    with tenancy.agency_context(agent.agency_id):
        execution = execution_create(agent=agent, input="Write, then search.")
    assert execution is not None
    execution = wait_for(execution, {"waiting_approval"})
    approve_all = {"type": "require_approval", "tools": ["*"], "description": "Everything"}
    with tenancy.agency_context(agent.agency_id):
        agent_update(
            agent=Agent.objects.get(pk=agent.pk),
            system_prompt="Prompt two.",
            constraints=[approve_all],
            llm_model=f"{model}-edited",
        )
        approval = Approval.objects.get(execution=execution)
        approval_decide(approval=approval, approve=True, user_id=None, reason="fine")

    execution = wait_for(execution, {"completed", "failed", "cancelled", "waiting_approval"})

    assert execution.status == ExecutionStatus.COMPLETED, (execution.status, execution.error)
    with tenancy.agency_context(agent.agency_id):
        assert Approval.objects.filter(execution=execution).count() == 1
        assert Execution.objects.get(pk=execution.pk).agent_version.number == 1  # type: ignore[union-attr]
    prompts = _system_prompts(fake_llm_server, model)
    assert len(prompts) == 3
    assert all(p.startswith("Prompt one.") for p in prompts), prompts
    assert fake_llm_server.requests_for(f"{model}-edited") == []
