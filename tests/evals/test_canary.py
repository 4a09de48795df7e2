"""Canary versions without a worker (the worker's tests: test_canary_worker.py): starting one is
validated (service, API, admin), the routing hook costs a plain run no query, the figures come
from the runs by version, and the rule (evaluated as a run's end sends it) rolls back with its
event and inbox notice, or promotes through the restore service."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from agents.lifecycle.listeners import RunEnded
from agents.models import Agent, AgentVersion, ExecutionStatus
from agents.runtime.setup import build_snapshot
from agents.services import agent_update, agent_version_restore
from core import tenancy
from core.exceptions import ApplicationError
from core.models import Event, Role
from evals.canary_plugin import CanaryPlugin, canary_run_ended
from evals.models import Canary, CanaryStatus
from evals.services.canaries import canary_evaluate, canary_routing, canary_start, canary_stop
from tests.agents.factories import AgentFactory, ExecutionFactory
from tests.api.conftest import token_client
from tests.factories import AgencyFactory, MembershipFactory, SiteFactory

pytestmark = pytest.mark.django_db


def _versions(agent: Agent) -> tuple[AgentVersion, AgentVersion]:
    """(candidate, stable): version 2 tried against version 3, a copy of version 1."""
    with tenancy.agency_context(agent.agency_id):
        agent_update(agent=agent, system_prompt="Version one.")
        first = agent.current_version
        assert first is not None
        agent_update(agent=agent, system_prompt="Version two.")
        candidate = agent.current_version
        assert candidate is not None
        stable = agent_version_restore(agent=agent, version=first)
    return candidate, stable


@pytest.fixture
def agent() -> Agent:
    agency = AgencyFactory.create()
    return AgentFactory.create(agency=agency, site=SiteFactory.create(agency=agency))


def _runs(canary: Canary, version: AgentVersion, statuses: list[str], **fields: Any) -> None:
    with tenancy.agency_context(canary.agency_id):
        for status in statuses:
            ExecutionFactory.create(
                agent=canary.agent, agent_version=version, status=status, **fields
            )


def test_a_canary_is_refused_for_a_current_or_foreign_version_a_bad_value_or_a_second_one(
    agent: Agent,
) -> None:
    candidate, stable = _versions(agent)
    other = AgentFactory.create(agency=agent.agency, site=agent.site)
    foreign, _ = _versions(other)
    with tenancy.agency_context(agent.agency_id):
        refusals: list[dict[str, Any]] = [
            {"candidate": stable},
            {"candidate": foreign},
            {"candidate": candidate, "share": 0},
            {"candidate": candidate, "share": 100},
            {"candidate": candidate, "min_runs": 4},
            {"candidate": candidate, "threshold": "-1"},
            {"candidate": candidate, "metric": "mood"},
        ]
        for kwargs in refusals:
            with pytest.raises(ApplicationError) as refused:
                canary_start(agent=agent, **kwargs)
            assert refused.value.status == 400, kwargs
        with pytest.raises(ApplicationError, match="is the agent's current version"):
            canary_start(agent=agent, candidate=stable)
        canary_start(agent=agent, candidate=candidate, share=20)
        with pytest.raises(ApplicationError) as second:
            canary_start(agent=agent, candidate=candidate)
        assert (second.value.status, "running canary already" in second.value.message) == (
            409,
            True,
        )
        assert Canary.objects.filter(agent=agent).count() == 1


def test_the_api_starts_stops_and_promotes_with_400_404_and_409(agent: Agent) -> None:
    candidate, stable = _versions(agent)
    staff = MembershipFactory.create(agency=agent.agency, role=Role.STAFF).user
    viewer = MembershipFactory.create(agency=agent.agency, role=Role.VIEWER).user
    client = token_client(staff)
    url = f"/api/v1/agents/{agent.pk}/canary/"

    assert client.get(url).status_code == 404
    current = client.post(url, {"candidate": stable.number}, format="json")
    assert current.status_code == 400, current.content
    assert "current version" in current.json()["message"]
    assert client.post(url, {"candidate": 99}, format="json").status_code == 404
    assert client.post(url, {"candidate": 2, "share": 120}, format="json").status_code == 400
    assert client.post(url, {"candidate": 2, "mood": 1}, format="json").status_code == 400
    assert token_client(viewer).post(url, {"candidate": 2}, format="json").status_code == 403

    started = client.post(
        url, {"candidate": candidate.number, "share": 30, "promote_after": 50}, format="json"
    )
    assert started.status_code == 201, started.content
    body = started.json()
    assert (body["status"], body["candidate_version"], body["stable_version"], body["share"]) == (
        "running", 2, 3, 30,
    )  # fmt: skip
    assert body["figures"]["candidate"]["runs"] == 0
    again = client.post(url, {"candidate": candidate.number}, format="json")
    assert again.status_code == 409
    assert "running canary already" in again.json()["message"]

    stopped = client.post(url + "stop/", {}, format="json")
    assert (stopped.status_code, stopped.json()["status"]) == (200, "stopped")
    assert client.post(url + "promote/", {}, format="json").status_code == 409

    client.post(url, {"candidate": candidate.number}, format="json")
    promoted = client.post(url + "promote/", {}, format="json")
    assert (promoted.status_code, promoted.json()["status"]) == (200, "promoted")
    with tenancy.agency_context(agent.agency_id):
        agent.refresh_from_db()
        current_version = agent.current_version
        assert current_version is not None
        # Made current by the restore service: a new version restored from the candidate.
        assert (current_version.number, current_version.restored_from_id) == (4, candidate.pk)
        assert current_version.config["system_prompt"] == "Version two."


def test_the_routing_hook_costs_a_plain_run_no_query(agent: Agent) -> None:
    """Measured: building a plain run's snapshot makes as many queries with the canary plugin
    as without it (the agent's "no canary" is a cache read); the hook and the run-ended
    listener make none once the cache holds the agent."""
    _versions(agent)
    with tenancy.agency_context(agent.agency_id):
        execution = ExecutionFactory.create(agent=agent)
        assert canary_routing(agent.pk) is None  # first read: one query, then cached

        def snapshot_queries() -> int:
            fresh = Agent.objects.get(pk=agent.pk)
            execution.agent_version_id = None
            with CaptureQueriesContext(connection) as queries:
                build_snapshot(fresh, execution)
            return len(queries)

        snapshot_queries()  # the first build fills the caches every run reads (tools, prices)
        with_canary = snapshot_queries()
        plugins = [p for p in settings.AGENTDESK_RUN_PLUGINS if "canary" not in p]
        with override_settings(AGENTDESK_RUN_PLUGINS=plugins):
            without = snapshot_queries()
        assert with_canary == without, (with_canary, without)
        with CaptureQueriesContext(connection) as queries:
            assert CanaryPlugin.version(execution) is None
            execution.agent_version_id = agent.current_version_id
            canary_run_ended(RunEnded(execution, ExecutionStatus.RUNNING, by_worker=True))
        assert len(queries) == 0


def test_a_candidate_that_fails_more_is_rolled_back_with_its_event_and_an_inbox_notice(
    agent: Agent,
    django_capture_on_commit_callbacks: Callable[..., Any],
    login: Callable[..., Client],
) -> None:
    candidate, stable = _versions(agent)
    agency = agent.agency
    with tenancy.agency_context(agent.agency_id):
        with django_capture_on_commit_callbacks(execute=True):
            canary = canary_start(agent=agent, candidate=candidate, share=50, min_runs=5)
        assert canary_routing(agent.pk) is not None
        _runs(canary, stable, [ExecutionStatus.COMPLETED] * 5)
        _runs(canary, candidate, [ExecutionStatus.FAILED] * 4)
        # Four ended candidate runs: under min_runs, no decision yet.
        assert canary_evaluate(canary_id=canary.pk) == CanaryStatus.RUNNING
        _runs(canary, candidate, [ExecutionStatus.FAILED])
        with django_capture_on_commit_callbacks(execute=True):
            assert canary_evaluate(canary_id=canary.pk) == CanaryStatus.ROLLED_BACK
        # Evaluated again (another run's end): nothing more happens.
        assert canary_evaluate(canary_id=canary.pk) == CanaryStatus.ROLLED_BACK

        canary.refresh_from_db()
        assert canary.reason.startswith("Rolled back by itself: failure rate 100% on the candidate")
        assert "z = 3.16" in canary.reason
        assert (canary.figures["candidate"]["failed"], canary.figures["stable"]["ended"]) == (5, 5)
        event = Event.objects.get(event_type="ai.version.rolled_back")
        assert event.payload["canary_id"] == str(canary.pk)
        assert event.payload["candidate_version"] == candidate.number
        assert canary_routing(agent.pk) is None  # new runs go to the current version again
        agent.refresh_from_db()
        assert agent.current_version_id == stable.pk

    staff = MembershipFactory.create(agency=agency, role=Role.STAFF).user
    inbox = login(staff).get(reverse("approvals_inbox:list"))
    text = inbox.content.decode()
    assert f"{agent.name}: canary of version {candidate.number} rolled back" in text
    assert reverse("admin:evals_canary_change", args=[canary.pk]) in text


def test_a_candidate_is_promoted_by_rule_after_n_runs_through_the_restore_service(
    agent: Agent,
) -> None:
    candidate, _stable = _versions(agent)
    with tenancy.agency_context(agent.agency_id):
        canary = canary_start(
            agent=agent, candidate=candidate, share=10, min_runs=5, promote_after=3
        )
        _runs(canary, candidate, [ExecutionStatus.COMPLETED] * 2, cost_usd=Decimal("0.01"))
        _runs(canary, candidate, [ExecutionStatus.RUNNING])  # not ended: not counted
        assert canary_evaluate(canary_id=canary.pk) == CanaryStatus.RUNNING
        _runs(canary, candidate, [ExecutionStatus.COMPLETED], cost_usd=Decimal("0.01"))
        assert canary_evaluate(canary_id=canary.pk) == CanaryStatus.PROMOTED
        canary.refresh_from_db()
        agent.refresh_from_db()
        assert canary.reason.startswith("Promoted by rule after 3 candidate runs")
        assert canary.promoted_version_id == agent.current_version_id
        assert agent.current_version is not None
        assert agent.current_version.restored_from_id == candidate.pk
        assert agent.system_prompt == "Version two."
        assert canary.figures["candidate"]["runs"] == 4
        assert canary.figures["candidate"]["cost_per_run"] == pytest.approx(0.01)
        assert not Event.objects.filter(event_type="ai.version.rolled_back").exists()


def test_the_agent_page_and_the_admin_start_show_and_stop_a_canary(
    agent: Agent, login: Callable[..., Client]
) -> None:
    _candidate, stable = _versions(agent)
    staff = MembershipFactory.create(agency=agent.agency, role=Role.STAFF).user
    client = login(staff)
    page = client.get(reverse("admin:agents_agent_change", args=[agent.pk])).content.decode()
    start = reverse("admin:evals_canary_add") + f"?agent={agent.pk}"
    assert "No canary yet" in page
    assert start.replace("&", "&amp;") in page

    form = client.get(start).content.decode()
    assert "Version 2" in form
    assert "Version 3" not in form
    refused = client.post(
        start,
        {"agent": agent.pk, "candidate": 2, "share": 0, "metric": "failure_rate",
         "threshold": "0.05", "min_runs": 20},
    )  # fmt: skip
    assert refused.status_code == 200
    assert "share must be a number between 1 and 99" in refused.content.decode()
    started = client.post(
        start,
        {"agent": agent.pk, "candidate": 2, "share": 25, "metric": "failure_rate",
         "threshold": "0.05", "min_runs": 20},
    )  # fmt: skip
    assert started.status_code == 302
    with tenancy.agency_context(agent.agency_id):
        canary = Canary.objects.get(agent=agent)
        _runs(canary, stable, [ExecutionStatus.COMPLETED, ExecutionStatus.FAILED])
    page = client.get(reverse("admin:agents_agent_change", args=[agent.pk])).content.decode()
    assert "Version 2 takes 25 % of new runs" in page
    assert "Stable (v3)" in page
    assert "Candidate (v2)" in page
    assert "50%" in page
    home = client.get(reverse("admin:index")).content.decode()
    assert 'id="home-canaries"' in home
    assert "Canary versions" in home

    stop = reverse("admin:evals_canary_stop", args=[canary.pk])
    assert stop in client.get(started["Location"]).content.decode()
    client.post(stop)
    with tenancy.agency_context(agent.agency_id):
        canary.refresh_from_db()
    assert (canary.status, canary.ended_by_id) == (CanaryStatus.STOPPED, staff.pk)
    ended = client.get(reverse("admin:evals_canary_change", args=[canary.pk])).content.decode()
    assert "Version 2 took 25 % of new runs" in ended
    assert stop not in ended  # no Promote or Stop once it has ended
    assert 'id="home-canaries"' not in client.get(reverse("admin:index")).content.decode()


def test_stopping_sends_new_runs_back_to_stable(
    agent: Agent, django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    candidate, stable = _versions(agent)
    with tenancy.agency_context(agent.agency_id):
        with django_capture_on_commit_callbacks(execute=True):
            canary = canary_start(agent=agent, candidate=candidate, share=99)
        execution = ExecutionFactory.create(agent=agent)
        routed = {CanaryPlugin.version(ExecutionFactory.create(agent=agent)) for _ in range(10)}
        assert routed <= {candidate.pk, stable.pk}
        assert candidate.pk in routed
        with django_capture_on_commit_callbacks(execute=True):
            canary_stop(canary=canary)
        assert CanaryPlugin.version(execution) is None
