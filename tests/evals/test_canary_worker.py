"""Canary versions through a real Celery worker and the fake provider (each version its own
model, so the fake provider answers each arm its own way): runs are routed by contact to the
arm the hash names and keep it; a candidate whose runs fail is rolled back by itself once each
arm has its minimum of runs (the event and the inbox notice exist, new runs go to stable); a
good candidate is promoted by rule after N runs; two evaluations at once roll back once."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable

import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse

from agents.models import Agent, AgentVersion, Execution, ExecutionStatus
from agents.services import agent_update, agent_version_restore, execution_create
from core import tenancy
from core.models import Event, Role
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import HttpError, text_reply
from evals.canary_plugin import routing_key
from evals.canary_rule import on_candidate
from evals.models import Canary, CanaryStatus
from evals.services.canaries import canary_evaluate, canary_start
from tests.agents.factories import AgentFactory, ExecutionFactory
from tests.factories import AgencyFactory, MembershipFactory, SiteFactory
from tests.processes import Worker, wait_for

pytestmark = pytest.mark.slow


def _versions(agent: Agent) -> tuple[AgentVersion, AgentVersion]:
    """(candidate, stable): version 2 on its own model, tried against version 3 (version 1)."""
    with tenancy.agency_context(agent.agency_id):
        agent_update(agent=agent, system_prompt="Answer briefly.")
        first = agent.current_version
        assert first is not None
        agent_update(agent=agent, llm_model=f"{agent.llm_model}-candidate")
        candidate = agent.current_version
        assert candidate is not None
        stable = agent_version_restore(agent=agent, version=first)
    return candidate, stable


def _contacts(canary: Canary, *, candidate: bool, count: int) -> list[str]:
    """Contacts whose runs the hash sends to the candidate (or to stable)."""
    found: list[str] = []
    while len(found) < count:
        contact = str(uuid.uuid4())
        key = routing_key(Execution(trigger_data={"contact_id": contact}))
        if on_candidate(canary.pk, key, canary.share) == candidate:
            found.append(contact)
    return found


def _start(agent: Agent, contact: str) -> Execution:
    with tenancy.agency_context(agent.agency_id):
        execution = execution_create(
            agent=Agent.objects.get(pk=agent.pk),
            input="Say hello to the contact.",
            trigger_data={"contact_id": contact},
        )
    assert execution is not None
    return execution


def _canary_until(canary: Canary, status: str, timeout: float = 45) -> Canary:
    deadline = time.monotonic() + timeout
    while True:
        with tenancy.agency_context(canary.agency_id):
            canary.refresh_from_db()
        if canary.status == status:
            return canary
        assert time.monotonic() < deadline, f"canary still {canary.status}"
        time.sleep(0.2)


def test_runs_go_to_their_contacts_arm_and_a_failing_candidate_rolls_back_by_itself(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
    login: Callable[..., Client],
) -> None:
    agent = make_agent("openai")
    fake_llm_server.script(agent.llm_model).responder = lambda _: text_reply("Hello from stable.")
    fake_llm_server.script(f"{agent.llm_model}-candidate").responder = lambda _: HttpError(
        status=400, message="The candidate's model refuses."
    )
    candidate, stable = _versions(agent)
    with tenancy.agency_context(agent.agency_id):
        canary = canary_start(agent=agent, candidate=candidate, share=50, min_runs=5)
    on_candidate_contacts = _contacts(canary, candidate=True, count=4)
    on_stable_contacts = _contacts(canary, candidate=False, count=5)
    # One candidate contact twice: a customer stays on one version.
    planned = [
        *((c, candidate) for c in [*on_candidate_contacts, on_candidate_contacts[0]]),
        *((c, stable) for c in on_stable_contacts),
    ]

    runs = [(_start(agent, contact), version) for contact, version in planned]
    ended = [(wait_for(execution), version) for execution, version in runs]

    for execution, version in ended:
        assert execution.agent_version_id == version.pk, execution.trigger_data
        expected = ExecutionStatus.FAILED if version == candidate else ExecutionStatus.COMPLETED
        assert execution.status == expected, execution.error
    canary = _canary_until(canary, CanaryStatus.ROLLED_BACK)
    assert canary.reason.startswith("Rolled back by itself: failure rate 100% on the candidate")
    assert (canary.figures["candidate"]["ended"], canary.figures["stable"]["ended"]) == (5, 5)
    with tenancy.agency_context(agent.agency_id):
        [event] = Event.objects.filter(event_type="ai.version.rolled_back")
    assert event.payload["canary_id"] == str(canary.pk)
    assert event.payload["candidate_version"] == candidate.number
    staff = MembershipFactory.create(agency=agent.agency, role=Role.STAFF).user
    inbox = login(staff).get(reverse("approvals_inbox:list")).content.decode()
    assert f"{agent.name}: canary of version {candidate.number} rolled back" in inbox
    # New runs, the candidate's contacts' too, go to the stable version again.
    after = wait_for(_start(agent, on_candidate_contacts[1]))
    assert (after.agent_version_id, after.status) == (stable.pk, ExecutionStatus.COMPLETED)


def test_a_good_candidate_is_promoted_by_rule_after_n_runs(
    make_agent: Callable[..., Agent], fake_llm_server: FakeProviderServer, celery_worker: Worker
) -> None:
    agent = make_agent("openai")
    fake_llm_server.script(agent.llm_model).responder = lambda _: text_reply("Stable.")
    fake_llm_server.script(f"{agent.llm_model}-candidate").responder = lambda _: text_reply(
        "Candidate."
    )
    candidate, _stable = _versions(agent)
    with tenancy.agency_context(agent.agency_id):
        canary = canary_start(
            agent=agent, candidate=candidate, share=10, min_runs=5, promote_after=3
        )
    for contact in _contacts(canary, candidate=True, count=3):
        run = wait_for(_start(agent, contact))
        assert (run.agent_version_id, run.output) == (candidate.pk, "Candidate.")

    canary = _canary_until(canary, CanaryStatus.PROMOTED)
    assert canary.reason.startswith("Promoted by rule after 3 candidate runs")
    with tenancy.agency_context(agent.agency_id):
        current = Agent.objects.select_related("current_version").get(pk=agent.pk)
    assert current.current_version is not None
    assert current.current_version.restored_from_id == candidate.pk
    assert current.llm_model == f"{agent.llm_model}-candidate"
    # The next run, whoever it is for, is on the promoted configuration.
    after = wait_for(_start(agent, str(uuid.uuid4())))
    assert (after.agent_version_id, after.output) == (current.current_version_id, "Candidate.")


def test_two_runs_ending_together_roll_back_once(live_db: None) -> None:
    """Two evaluations at once (two runs' ends on two workers): the canary's row lock makes the
    second wait and find it ended, so there is one rollback and one event."""
    agency = AgencyFactory.create()
    agent = AgentFactory.create(agency=agency, site=SiteFactory.create(agency=agency))
    candidate, stable = _versions(agent)
    with tenancy.agency_context(agency.id):
        canary = canary_start(agent=agent, candidate=candidate, share=50, min_runs=5)
        for version, status in [(stable, ExecutionStatus.COMPLETED), (candidate, "failed")]:
            for _ in range(5):
                ExecutionFactory.create(agent=agent, agent_version=version, status=status)
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def evaluate() -> None:
        try:
            with tenancy.agency_context(agency.id):
                barrier.wait(timeout=10)
                outcomes.append(canary_evaluate(canary_id=canary.pk))
        finally:
            connection.close()

    threads = [threading.Thread(target=evaluate) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert outcomes == [CanaryStatus.ROLLED_BACK, CanaryStatus.ROLLED_BACK]
    with tenancy.agency_context(agency.id):
        assert Event.objects.filter(event_type="ai.version.rolled_back").count() == 1
        assert Canary.objects.get(pk=canary.pk).status == CanaryStatus.ROLLED_BACK
