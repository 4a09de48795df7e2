"""Each agent of the demo agency, run by a real Celery worker against the demo model (the scripted
provider `manage.py up` starts): it calls the tools it should, on the seeded CRM data, and
finishes, or waits for an approval (the SDR's e-mail) and finishes once approved."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agents.llm.fake_server.demo import DemoModelServer
from agents.models import Agent, Execution, ExecutionStatus, TriggerType
from agents.services import execution_create
from approvals.models import Approval, ApprovalStatus, RiskRule
from approvals.services import approval_decide
from core import tenancy
from core.demo import demo_data_seed
from core.demo.data import RISK_RULE
from core.models import Agency
from crm.models import Contact, EmailMessage, Note, Task
from tests.factories import AgencyFactory, SiteFactory
from tests.processes import Worker, wait_for
from tools.models import ToolCall

pytestmark = pytest.mark.slow
PARKED = {"waiting_approval", "completed", "failed", "cancelled", "timed_out"}


@pytest.fixture(scope="module")
def demo_model() -> Iterator[DemoModelServer]:
    with DemoModelServer(think_seconds=0, stream_interval=0, record=True) as server:
        yield server


@pytest.fixture
def demo_agency(live_db: None, demo_model: DemoModelServer) -> Agency:
    """A fresh agency with the demo data (not the demo agency itself: tests commit)."""
    agency = AgencyFactory.create()
    SiteFactory.create(agency=agency)
    demo_data_seed(agency=agency, model_url=demo_model.openai_base_url)
    return agency


def _start(agency: Agency, slug: str, text: str, trigger: str = TriggerType.MANUAL) -> Execution:
    with tenancy.agency_context(agency.id):
        agent = Agent.objects.get(agency=agency, slug=slug)
        execution = execution_create(agent=agent, input=text, trigger_type=trigger)
    assert execution is not None
    return execution


def _calls(execution: Execution) -> list[tuple[str, str]]:
    with tenancy.agency_context(execution.agency_id):
        return list(
            ToolCall.objects.filter(execution=execution)
            .order_by("created_at")
            .values_list("tool_name", "status")
        )


def test_every_demo_agent_runs_its_tools_and_the_sdr_waits_for_approval(
    demo_agency: Agency, demo_model: DemoModelServer, celery_worker: Worker
) -> None:
    runs = {
        "alex": _start(demo_agency, "alex", "Follow up with Marcus Oyelaran about his demo."),
        "sdr-agent": _start(
            demo_agency, "sdr-agent", "Reach out to Priya Raman about her pricing question."
        ),
        "bi-agent": _start(demo_agency, "bi-agent", ""),
        "cs-orchestrator": _start(demo_agency, "cs-orchestrator", ""),
        "security-guardian": _start(
            demo_agency, "security-guardian", "", trigger=TriggerType.SCHEDULE
        ),
    }
    done = {slug: wait_for(execution, PARKED) for slug, execution in runs.items()}

    for slug in ("alex", "bi-agent", "cs-orchestrator", "security-guardian"):
        assert done[slug].status == ExecutionStatus.COMPLETED, (slug, done[slug].error)
        assert all(status == "completed" for _, status in _calls(done[slug])), _calls(done[slug])
    tools = {slug: [name for name, _ in _calls(execution)] for slug, execution in done.items()}
    assert tools["alex"] == [
        "crm_search_contacts",
        "crm_get_contact",
        "crm_add_note",
        "task_create",
    ]
    assert tools["bi-agent"] == ["data_aggregate", "data_aggregate", "data_query", "notify_user"]
    assert tools["cs-orchestrator"] == ["data_query", "data_query", "task_create", "notify_user"]
    assert tools["security-guardian"] == ["data_query", "data_query"]  # all clear: no alert
    assert _calls(done["sdr-agent"]) == [
        ("crm_search_contacts", "completed"),
        ("crm_get_contact", "completed"),
        ("crm_add_note", "completed"),
        ("email_send", "waiting_approval"),
    ]
    assert done["sdr-agent"].status == ExecutionStatus.WAITING_APPROVAL
    assert "Marcus Oyelaran" in done["alex"].output
    assert "Pipeline report" in done["bi-agent"].output
    assert "All clear" in done["security-guardian"].output

    with tenancy.agency_context(demo_agency.id):
        marcus = Contact.objects.get(agency=demo_agency, last_name="Oyelaran")
        priya = Contact.objects.get(agency=demo_agency, last_name="Raman")
        assert Note.objects.filter(contact=marcus, agent__slug="alex").exists()
        assert Note.objects.get(contact=priya, agent__slug="sdr-agent").content.startswith(
            "Lead score"
        )
        assert Task.objects.filter(agent__slug="cs-orchestrator", title__contains="Renewal")
        approval = Approval.objects.get(execution=done["sdr-agent"])
    assert approval.status == ApprovalStatus.PENDING
    assert approval.action_type == "email_send"
    assert approval.proposed_arguments["to"] == [priya.email]
    assert approval.risk_level == "high"
    with tenancy.agency_context(demo_agency.id):
        assert RiskRule.objects.get(approvals=approval).name == RISK_RULE["name"]
    # Every model call carried the demo model's name and got a scripted reply.
    assert {r.model for r in demo_model.requests} == {"demo model (scripted, no AI)"}

    with tenancy.agency_context(demo_agency.id):
        approval_decide(approval=approval, approve=True, user_id=None, reason="Looks good.")
    sdr = wait_for(done["sdr-agent"])

    assert sdr.status == ExecutionStatus.COMPLETED, sdr.error
    assert _calls(sdr)[-1] == ("email_send", "completed")
    assert "approved" in sdr.output
    with tenancy.agency_context(demo_agency.id):
        email = EmailMessage.objects.get(execution=sdr)
    assert email.to == [priya.email]
    assert email.subject == "A quick idea for Northwind Traders"
