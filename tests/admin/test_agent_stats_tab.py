"""The agent page's "Runs & stats" and "Limits & budget" tabs agree with its runs (issue 27 item
2): the runs are counted from the runs themselves, as the list of its executions counts them
(the agent's counters count only runs that ended completed or failed: 3 "total runs" beside 4
executions listed while one waited); and "This agent today" includes what a run still going has
spent (a run's usage row is written when it ends: a run waiting for an answer had cost money
and the agent's day said 0.00 USD), shown to the fraction of a cent a demo run costs."""

from __future__ import annotations

import datetime
import html
import re
from decimal import Decimal

import pytest
from django.test import Client
from django.utils import timezone

from agents import lifecycle
from agents.models import Agent, Execution, ExecutionPurpose, ExecutionStatus, StopReason
from agents.selectors import agent_run_counts
from core import tenancy
from core.models import Agency, Role, Site
from tests.admin.conftest import member
from tests.admin.helpers import change_url
from tests.agents.factories import AgentFactory
from tests.factories import SiteFactory
from usage.selectors import agent_spend_today

pytestmark = pytest.mark.django_db

STOPS: dict[str, str] = {
    ExecutionStatus.COMPLETED: StopReason.FINAL_ANSWER,
    ExecutionStatus.FAILED: StopReason.ERROR,
    ExecutionStatus.CANCELLED: StopReason.CANCELLED,
}


def _run(agent: Agent, status: str, cost: str, purpose: str = ExecutionPurpose.RUN) -> Execution:
    """A run of ``agent`` that spent ``cost``: ended with ``status`` through the lifecycle's end
    of a run (agent counters, usage row), or still in ``status`` (running, waiting)."""
    with tenancy.agency_context(agent.agency_id):
        execution = Execution.objects.create(
            agency_id=agent.agency_id,
            agent=agent,
            site_id=agent.site_id,
            trigger_type="manual",
            status=ExecutionStatus.RUNNING,
            started_at=timezone.now() - datetime.timedelta(seconds=2),
            cost_usd=Decimal(cost),
            tokens_total=1000,
            llm_call_count=1,
            purpose=purpose,
        )
        if status in STOPS:
            lifecycle.finish_execution(execution, status=status, stop_reason=STOPS[status])
        else:
            execution.status = status
        execution.save()
    return execution


def _text(content: bytes | str, *, tags: str = " ") -> str:
    text = content.decode() if isinstance(content, bytes) else content
    return " ".join(html.unescape(re.sub(r"<[^>]+>", tags, text)).split())


@pytest.fixture
def agent(site: Site) -> Agent:
    agent = AgentFactory.create(agency=site.agency, site=site, name="Alex")
    _run(agent, ExecutionStatus.COMPLETED, "0.000412")
    _run(agent, ExecutionStatus.COMPLETED, "0.000300")
    _run(agent, ExecutionStatus.FAILED, "0.000100")
    _run(agent, ExecutionStatus.CANCELLED, "0")
    _run(agent, ExecutionStatus.WAITING_INPUT, "0.000250")  # asked a person, cost money
    return agent


def test_the_stats_tab_counts_the_runs_the_executions_list_shows(agent: Agent, site: Site) -> None:
    client = Client()
    client.force_login(member(site.agency, Role.STAFF))

    content = client.get(change_url(agent)).content.decode()
    listed = client.get(f"/admin/agents/execution/?agent__id__exact={agent.pk}")

    runs = re.search(r"<span data-agent-runs=\"5\">(.*?)</span>", content)
    assert runs is not None
    assert _text(runs[1], tags="") == (
        "5 runs: 1 waiting for input · 2 completed · 1 failed · 1 cancelled"
    )
    totals = re.search(r"<span data-agent-run-totals>(.*?)</span>", content)
    assert totals is not None
    assert totals[1] == "5000 tokens, $0.001062, 0 tool calls"  # today's spend, all of it
    text = _text(content)
    assert "Total runs" not in text  # the counters' 3 (completed, failed) disagreed
    assert "Total cost" not in text  # and their 0.000812, below today's spend
    assert listed.context["cl"].result_count == 5


def test_this_agent_today_includes_a_run_still_going(agent: Agent, site: Site) -> None:
    client = Client()
    client.force_login(member(site.agency, Role.STAFF))

    page = _text(client.get(change_url(agent)).content)

    # 0.000412 + 0.000300 + 0.000100 ended today, 0.000250 spent by the run waiting.
    assert "This agent today $0.001062 for its runs (4 ended, 1 still going: $0.00025 so far)" in (
        page
    )


def test_the_selectors_read_only_the_agents_own_agency(agent: Agent, site: Site) -> None:
    """An agent of another agency with runs of its own: neither its runs nor its usage count,
    even when read outside any tenant context."""
    other = AgentFactory.create(agency=(other_site := SiteFactory.create()).agency, site=other_site)
    _run(other, ExecutionStatus.COMPLETED, "1")
    _run(other, ExecutionStatus.RUNNING, "1")
    forged = Agent(pk=other.pk, agency_id=site.agency_id)  # another agency's agent id

    with tenancy.platform_context():
        counts = agent_run_counts(agent=agent)
        spend = agent_spend_today(agent=agent)
        forged_counts = agent_run_counts(agent=forged)
        forged_spend = agent_spend_today(agent=forged)

    assert counts.total == 5
    assert (counts.tokens, counts.cost_usd) == (5000, Decimal("0.001062"))
    assert counts.by_status[ExecutionStatus.WAITING_INPUT] == 1
    assert (spend.ended_runs, spend.going_runs) == (4, 1)
    assert spend.spent_usd == Decimal("0.001062")
    assert forged_counts.total == 0
    assert (forged_spend.ended_runs, forged_spend.going_runs, forged_spend.spent_usd) == (
        0,
        0,
        Decimal(0),
    )


def test_an_agency_without_runs_says_zero(site: Site, agency: Agency) -> None:
    agent = AgentFactory.create(agency=agency, site=site)
    client = Client()
    client.force_login(member(agency, Role.STAFF))

    page = _text(client.get(change_url(agent)).content)

    assert "0 runs" in page
    assert "This agent today $0.00 for its runs (0 ended)" in page


def test_the_agents_list_counts_the_same_runs(agent: Agent, site: Site) -> None:
    client = Client()
    client.force_login(member(site.agency, Role.STAFF))

    response = client.get("/admin/agents/agent/?o=-8")  # sorted by it (the eighth column)

    rows = list(response.context["cl"].result_list)
    assert [(row.pk, row.run_count) for row in rows] == [(agent.pk, 5)]
    content = response.content.decode()
    cell = re.search(r'<td class="field-runs[^"]*"[^>]*>\s*(\d+)\s*</td>', content)
    assert cell is not None
    assert cell[1] == "5"


def test_an_experiments_runs_are_listed_apart_and_counted_in_none_of_the_figures(
    agent: Agent, site: Site
) -> None:
    """An experiment's runs (evaluation runs, evals/) are none of the agent's runs: its counters,
    its "Runs & stats" and the agents list leave them out; the executions list shows them under
    its "purpose" filter; their cost (real spend) is apart in "This agent today"."""
    _run(agent, ExecutionStatus.COMPLETED, "0.002", ExecutionPurpose.EVALUATION)
    _run(agent, ExecutionStatus.FAILED, "0.001", ExecutionPurpose.EVALUATION)
    _run(agent, ExecutionStatus.RUNNING, "0.0005", ExecutionPurpose.EVALUATION)
    client = Client()
    client.force_login(member(site.agency, Role.STAFF))

    content = client.get(change_url(agent)).content.decode()
    runs = client.get(f"/admin/agents/execution/?agent__id__exact={agent.pk}&purpose__exact=run")
    evaluations = client.get("/admin/agents/execution/?purpose__exact=evaluation")
    agents = client.get("/admin/agents/agent/")

    with tenancy.agency_context(agent.agency_id):
        agent.refresh_from_db()
    assert (agent.total_runs, agent.failed_runs) == (3, 1)  # 2 completed, 1 failed: its own
    assert re.search(r"<span data-agent-runs=\"5\">", content)
    link = f"?agent__id__exact={agent.pk}&amp;purpose__exact=run"
    assert f'href="/admin/agents/execution/{link}"' in content
    assert runs.context["cl"].result_count == 5
    assert evaluations.context["cl"].result_count == 3
    assert "Evaluation" in _text(evaluations.content)  # the filter's choice
    assert [row.run_count for row in agents.context["cl"].result_list] == [5]
    assert (
        "This agent today $0.001062 for its runs (4 ended, 1 still going: $0.00025 so far); "
        "$0.003 for its experiments' runs: $0.004062 in all"
    ) in _text(content)
