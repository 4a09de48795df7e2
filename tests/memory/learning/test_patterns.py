"""Learned patterns (memory.learning.patterns): a good run's approach is stored with its
arguments generalised, a repeat reinforces it, a person's mark overrides the threshold, and a run
is given only its own agent's patterns."""

from __future__ import annotations

from decimal import Decimal
from unittest import mock

import pytest

from agents.models import Agent
from agents.runtime import setup
from approvals.models import ApprovalStatus
from core import tenancy
from memory.learning import patterns
from memory.learning.models import LearnedPattern, PatternOutcome, PatternUse, RunQuality
from memory.learning.services import learn_after_run, quality_mark
from tests.agents.factories import AgentFactory, ExecutionFactory
from tests.approvals.factories import ApprovalFactory
from tests.memory.learning.helpers import CONTACT_ID, finished_run
from tools.models import ToolCall

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent() -> Agent:
    return AgentFactory.create(learning_enabled=True)


def agent_patterns(agent: Agent) -> list[LearnedPattern]:
    with tenancy.agency_context(agent.agency_id):
        return list(LearnedPattern.objects.filter(agent=agent))


def test_the_task_type_comes_from_the_trigger_and_the_instructions_first_words() -> None:
    agent = AgentFactory.create()
    log = ExecutionFactory.build(agent=agent, input="Please log that Ada called.")
    find = ExecutionFactory.build(agent=agent, input="Find the contacts of Acme and e-mail them")
    scheduled = ExecutionFactory.build(agent=agent, input="", trigger_type="schedule")

    assert patterns.task_type(log) == "manual:log"
    assert patterns.task_type(find) == "manual:find/contact"
    assert patterns.task_type(scheduled) == "schedule:task"


def test_concrete_values_become_placeholders() -> None:
    known = {"bob@globex.com": "email"}
    arguments = {
        "contact_id": CONTACT_ID,
        "email": "bob@globex.com",
        "to": "bob@globex.com",
        "limit": 5,
        "status": "active",
        "query": "Ada Lovelace",
        "content": "A note long enough to be free text rather than a constant value.",
        "tags": ["vip"],
        "notify": True,
    }

    general = patterns.generalise(arguments, known=known, instruction="find ada lovelace")

    assert general == {
        "contact_id": "<contact_id>",
        "email": "<email>",
        "to": "<to>",
        "limit": "<limit>",
        "status": "active",
        "query": "<query>",
        "content": "<content>",
        "tags": ["vip"],
        "notify": True,
    }


def test_a_good_run_teaches_its_approach_and_a_repeat_reinforces_it(agent: Agent) -> None:
    first = finished_run(agent)
    learn_after_run(first.id, agency_id=agent.agency_id)

    (pattern,) = agent_patterns(agent)
    assert pattern.task_type == "manual:log"
    assert pattern.tool_sequence == ["crm_search_contacts", "crm_add_note"]
    assert pattern.steps == [
        {"tool": "crm_search_contacts", "arguments": {"query": "<query>"}},
        {
            "tool": "crm_add_note",
            "arguments": {"contact_id": "<contact_id>", "content": "<content>"},
        },
    ]
    assert pattern.embedding is not None
    assert pattern.embedding_model
    assert (pattern.success_count, pattern.failure_count) == (1, 0)
    first_confidence = pattern.confidence

    second = finished_run(agent, text="Log that Grace Hopper called about the renewal.")
    learn_after_run(second.id, agency_id=agent.agency_id)

    (reinforced,) = agent_patterns(agent)
    assert reinforced.pk == pattern.pk
    assert reinforced.success_count == 2
    assert reinforced.confidence == first_confidence + patterns.REINFORCE
    assert reinforced.source_executions == [first.id, second.id]


def test_only_a_new_pattern_embeds_its_description(agent: Agent) -> None:
    """A repeat of a learned approach reinforces the pattern and uses no vector: the after-run
    work does not embed its description (the local model's forward pass is most of its CPU)."""
    first = finished_run(agent)
    with mock.patch.object(patterns.embeddings, "embed", wraps=patterns.embeddings.embed) as spy:
        learn_after_run(first.id, agency_id=agent.agency_id)
        assert spy.call_count == 1

        second = finished_run(agent, text="Log that Grace Hopper called about the renewal.")
        learn_after_run(second.id, agency_id=agent.agency_id)
        assert spy.call_count == 1

    (pattern,) = agent_patterns(agent)
    assert pattern.success_count == 2
    assert pattern.embedding is not None


def test_nothing_is_learned_when_learning_is_off_or_the_run_used_no_tool() -> None:
    off = AgentFactory.create(learning_enabled=False)
    on = AgentFactory.create(learning_enabled=True)
    learn_after_run(finished_run(off).id, agency_id=off.agency_id)
    learn_after_run(finished_run(on, calls=[]).id, agency_id=on.agency_id)

    assert agent_patterns(off) == []
    assert agent_patterns(on) == []


def test_a_human_mark_good_overrides_the_threshold_and_stores_a_pattern() -> None:
    agent = AgentFactory.create(learning_enabled=True, quality_threshold=Decimal("0.99"))
    execution = finished_run(agent)
    with tenancy.agency_context(agent.agency_id):
        ApprovalFactory.create(
            tool_call=ToolCall.objects.filter(execution=execution).first(),
            status=ApprovalStatus.APPROVED,
            edited_arguments={"query": "Ada L."},
            decided_at=execution.created_at,
        )
    learn_after_run(execution.id, agency_id=agent.agency_id)
    assert agent_patterns(agent) == []  # 0.96 < 0.99

    with tenancy.agency_context(agent.agency_id):
        row = quality_mark(execution=execution, mark="good", note="Exactly right.")

    (pattern,) = agent_patterns(agent)
    assert row.human_mark == "good"
    assert row.is_good
    assert row.pattern_id == pattern.pk
    assert row.human_note == "Exactly right."


def test_marking_bad_a_run_that_taught_a_pattern_takes_its_confidence_back(agent: Agent) -> None:
    execution = finished_run(agent)
    learn_after_run(execution.id, agency_id=agent.agency_id)
    (before,) = agent_patterns(agent)

    with tenancy.agency_context(agent.agency_id):
        row = quality_mark(execution=execution, mark="bad")

    (after,) = agent_patterns(agent)
    assert row.pattern_id is None
    assert (after.success_count, after.failure_count) == (0, 1)
    assert after.confidence == before.confidence - patterns.REINFORCE - patterns.PENALTY


def test_a_run_given_a_pattern_that_fails_lowers_its_confidence_once(agent: Agent) -> None:
    learn_after_run(finished_run(agent).id, agency_id=agent.agency_id)
    (pattern,) = agent_patterns(agent)
    failed = finished_run(agent, status="failed", text="Log that Grace Hopper called.")
    with tenancy.agency_context(agent.agency_id):
        PatternUse.objects.create(agency_id=agent.agency_id, execution=failed, pattern=pattern)

    learn_after_run(failed.id, agency_id=agent.agency_id)
    with tenancy.agency_context(agent.agency_id):  # a person disagrees: the run was fine
        quality_mark(execution=failed, mark="good")
        use = PatternUse.objects.get(execution=failed)
        marked = RunQuality.objects.get(execution=failed)

    (after,) = agent_patterns(agent)
    assert use.outcome == PatternOutcome.SUCCESS
    assert marked.pattern_id == pattern.pk  # and, marked good, it taught the same pattern
    assert after.failure_count == 0
    assert after.success_count == 3  # its source, the mark of the given run, its own lesson


def test_a_runs_prompt_gets_only_its_own_agents_patterns(agent: Agent) -> None:
    learn_after_run(finished_run(agent).id, agency_id=agent.agency_id)
    other_agent = AgentFactory.create(learning_enabled=True, agency=agent.agency, site=agent.site)
    other_agency = AgentFactory.create(learning_enabled=True)
    for other in (other_agent, other_agency):
        learn_after_run(
            finished_run(other, calls=[("web_search", {"query": "x"}, "completed")]).id,
            agency_id=other.agency_id,
        )

    with tenancy.agency_context(agent.agency_id):
        execution = ExecutionFactory.create(agent=agent, input="Log that Grace Hopper called.")
        prompt = setup.build_snapshot(agent, execution)["system_prompt"]
        given = list(
            PatternUse.objects.filter(execution=execution).values_list(
                "pattern__agent_id", flat=True
            )
        )

    assert patterns.PROMPT_HEADING in prompt
    assert "crm_search_contacts(query=<query>) -> crm_add_note(" in prompt
    assert "web_search" not in prompt
    assert given == [agent.id]
