"""Learning through real workers and the fake model server: a pattern learned from a good run is
in the next similar run's system prompt; a pattern given to a run that fails loses confidence; a
tool that returns nothing grants the run extra steps to investigate, recorded with its findings.
The after-run task (memory.after_run, on the worker) scores each run."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from decimal import Decimal

import pytest
from django.db.models import Sum

from agents.models import Agent, Execution, ExecutionStatus, StopReason
from agents.services import execution_create
from core import tenancy
from crm.models import Contact
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import (
    HttpError,
    RecordedRequest,
    Reply,
    Responder,
    by_turn,
    text_reply,
    tool_call_reply,
)
from memory.learning import patterns, quality
from memory.learning.models import (
    Investigation,
    InvestigationOutcome,
    LearnedPattern,
    PatternOutcome,
    PatternUse,
    RunQuality,
)
from tests.processes import Worker, wait_for
from usage.models import UsageDaily

LEARNING = {"learning_enabled": True, "memory_extraction_enabled": False}


def start(agent: Agent, text: str) -> Execution:
    with tenancy.agency_context(agent.agency_id):
        execution = execution_create(agent=agent, input=text)
    assert execution is not None
    return execution


def scored(execution: Execution, timeout: float = 60) -> RunQuality:
    """The run's quality, once the worker's after-run task wrote it."""
    deadline = time.monotonic() + timeout
    while True:
        with tenancy.agency_context(execution.agency_id):
            row = RunQuality.objects.filter(execution_id=execution.id).first()
        if row is not None:
            return row
        assert time.monotonic() < deadline, "the run was not scored"
        time.sleep(0.1)


def note_script(contact: Contact) -> Responder:
    return by_turn(
        tool_call_reply("crm_search_contacts", {"query": "Ada"}),
        tool_call_reply(
            "crm_add_note", {"contact_id": str(contact.id), "content": "Called about pricing."}
        ),
        text_reply("Noted the call on Ada's record."),
    )


def test_a_pattern_learned_from_a_good_run_is_in_the_next_similar_runs_context(
    make_agent: Callable[..., Agent], fake_llm_server: FakeProviderServer, celery_worker: Worker
) -> None:
    agent = make_agent(allowed_tools=["crm_*"], **LEARNING)
    with tenancy.agency_context(agent.agency_id):
        contact = Contact.objects.create(
            agency_id=agent.agency_id, first_name="Ada", last_name="Lovelace", email="ada@x.org"
        )
    fake_llm_server.set_responder(note_script(contact), key=agent.llm_model)

    first = wait_for(start(agent, "Log that Ada called about pricing."))
    assert first.status == ExecutionStatus.COMPLETED, first.error
    quality = scored(first)
    assert quality.score == 1.0
    assert quality.pattern_id is not None

    second = wait_for(start(agent, "Log that Ada phoned about pricing again."))

    assert second.status == ExecutionStatus.COMPLETED, second.error
    requests = fake_llm_server.requests_for(agent.llm_model)
    assert len(requests) == 6
    assert patterns.PROMPT_HEADING not in (requests[0].system or "")
    system = requests[3].system or ""
    assert patterns.PROMPT_HEADING in system
    assert (
        "For manual:log (confidence 0.90, 1 good run): crm_search_contacts(query=<query>) -> "
        "crm_add_note(content=<content>, contact_id=<contact_id>)" in system
    )
    with tenancy.agency_context(agent.agency_id):
        (use,) = PatternUse.objects.filter(execution_id=second.id)
    assert use.pattern_id == quality.pattern_id
    scored(second)
    with tenancy.agency_context(agent.agency_id):
        use.refresh_from_db()
        pattern = LearnedPattern.objects.get(pk=use.pattern_id)
    assert use.outcome == PatternOutcome.SUCCESS
    assert pattern.success_count == 3  # taught, given to a good run, and taught again


def test_a_pattern_that_leads_to_a_failure_loses_confidence(
    make_agent: Callable[..., Agent], fake_llm_server: FakeProviderServer, celery_worker: Worker
) -> None:
    agent = make_agent(allowed_tools=["crm_*"], **LEARNING)
    with tenancy.agency_context(agent.agency_id):
        pattern = LearnedPattern.objects.create(
            agency_id=agent.agency_id,
            agent=agent,
            task_type="manual:log",
            description="Log that Ada called about pricing.",
            tool_sequence=["crm_search_contacts"],
            steps=[{"tool": "crm_search_contacts", "arguments": {"query": "<query>"}}],
            confidence=Decimal("0.80"),
            success_count=2,
        )
    fake_llm_server.set_responder(
        by_turn(HttpError(status=400, message="bad request")), key=agent.llm_model
    )

    run = wait_for(start(agent, "Log that Grace called about pricing."))

    assert run.status == ExecutionStatus.FAILED
    (request,) = fake_llm_server.requests_for(agent.llm_model)
    assert "crm_search_contacts(query=<query>)" in (request.system or "")
    quality = scored(run)
    assert not quality.is_good
    with tenancy.agency_context(agent.agency_id):
        pattern.refresh_from_db()
        use = PatternUse.objects.get(execution_id=run.id)
    assert use.outcome == PatternOutcome.FAILURE
    assert pattern.failure_count == 1
    assert pattern.confidence == Decimal("0.80") - patterns.PENALTY


def investigation_script() -> Responder:
    return by_turn(
        tool_call_reply("crm_search_contacts", {"query": "Zed Shaw"}),
        tool_call_reply(
            "crm_search_contacts", {"query": "Shaw"}, text="Maybe only the surname is stored."
        ),
        text_reply("There is no contact named Zed Shaw, not even under his surname."),
    )


def test_a_tool_returning_nothing_grants_extra_steps_and_records_an_investigation(
    make_agent: Callable[..., Agent], fake_llm_server: FakeProviderServer, celery_worker: Worker
) -> None:
    agent = make_agent(
        allowed_tools=["crm_*"], max_steps_per_run=2, investigation_max_steps=2, **LEARNING
    )
    without = make_agent(allowed_tools=["crm_*"], max_steps_per_run=2, **LEARNING)
    for each in (agent, without):
        fake_llm_server.set_responder(investigation_script(), key=each.llm_model)

    run = wait_for(start(agent, "Find Zed Shaw's phone number."))
    control = wait_for(start(without, "Find Zed Shaw's phone number."))

    assert control.stop_reason == StopReason.MAX_STEPS  # two steps were not enough
    assert run.status == ExecutionStatus.COMPLETED, run.error
    assert run.config_snapshot["max_steps_per_run"] == 4
    told = json.loads(fake_llm_server.requests_for(agent.llm_model)[1].tool_results[-1])
    assert told["contacts"] == []
    assert "investigate" in told["investigate"]
    scored(run)
    with tenancy.agency_context(agent.agency_id):
        (investigation,) = Investigation.objects.filter(execution_id=run.id)
        assert not Investigation.objects.filter(execution_id=control.id).exists()
    assert investigation.tool_name == "crm_search_contacts"
    assert investigation.trigger == "empty_result"
    assert investigation.steps_granted == 2
    assert investigation.steps_used == 2
    assert "Maybe only the surname is stored. [called crm_search_contacts]" in (
        investigation.findings
    )
    assert "There is no contact named Zed Shaw" in investigation.findings
    assert investigation.outcome == InvestigationOutcome.RESOLVED


def test_the_model_judge_scores_the_run_and_its_call_is_counted(
    make_agent: Callable[..., Agent], fake_llm_server: FakeProviderServer, celery_worker: Worker
) -> None:
    agent = make_agent(quality_judge_enabled=True, **LEARNING)

    def respond(request: RecordedRequest) -> Reply:
        if (request.system or "").startswith(quality.JUDGE_PROMPT[:40]):
            return text_reply('{"score": 0.2, "verdict": "bad", "reason": "Wrong customer."}')
        return text_reply("Done.")

    fake_llm_server.set_responder(respond, key=agent.llm_model)

    run = wait_for(start(agent, "Greet the customer."))
    row = scored(run)

    assert run.status == ExecutionStatus.COMPLETED, run.error
    assert (row.judge_score, row.judge_verdict, row.judge_reason) == (0.2, "bad", "Wrong customer.")
    assert row.signals["judge"]["value"] == 0.2
    assert row.score == pytest.approx((0.85 + 0.3 * 0.2) / 1.15, abs=1e-3)
    assert not row.is_good  # the judge pulled it below 0.80
    assert len(fake_llm_server.requests_for(agent.llm_model)) == 2
    with tenancy.agency_context(agent.agency_id):
        result = Execution.objects.get(pk=run.pk).result
        usage = UsageDaily.objects.filter(agent_id=agent.id).aggregate(calls=Sum("llm_calls"))
    assert result["quality_judge"]["tokens"] > 0
    assert usage["calls"] == 2  # the run's step and the judge
