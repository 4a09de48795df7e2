"""Each agent of the demo agency, run by a real Celery worker against the demo model (the scripted
provider `manage.py up` starts): it calls the tools it should, on the seeded CRM data, and
finishes, or waits for an approval (the SDR's e-mail) and finishes once approved; the CS
orchestrator delegates to the renewal manager; a second run of a conversation does what it is
asked, not what the first run was."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from agents.models import (
    Agent,
    AgentMessage,
    Execution,
    ExecutionStatus,
    ExecutionStep,
    MessageType,
    StopReason,
    TriggerType,
)
from agents.services import execution_create
from approvals.models import Approval, ApprovalStatus, RiskRule
from approvals.services import approval_decide
from core import tenancy
from core.models import Agency
from crm.models import Contact, EmailMessage, Note, Task
from devkit.demo import demo_data_seed
from devkit.demo.data import RENEWAL_MANAGER, RISK_RULE
from devkit.fake_server.demo import DemoModelServer
from memory.episodes import DONE_KEY
from memory.models import Conversation, Memory
from tests.factories import AgencyFactory, SiteFactory, UserFactory
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


def _start(
    agency: Agency,
    slug: str,
    text: str,
    trigger: str = TriggerType.MANUAL,
    *,
    user_id: int | None = None,
) -> Execution:
    with tenancy.agency_context(agency.id):
        agent = Agent.objects.get(agency=agency, slug=slug)
        execution = execution_create(
            agent=agent, input=text, trigger_type=trigger, triggered_by_id=user_id
        )
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
    assert tools["cs-orchestrator"] == [
        "data_query",
        "data_query",
        "delegate_to_agent",
        "notify_user",
    ]
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
        assert Task.objects.filter(agent__slug=RENEWAL_MANAGER, title__startswith="Follow up")
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


def test_the_cs_orchestrator_delegates_a_renewal_to_the_renewal_manager_and_says_so(
    demo_agency: Agency, demo_model: DemoModelServer, celery_worker: Worker
) -> None:
    run = wait_for(_start(demo_agency, "cs-orchestrator", ""))

    assert run.status == ExecutionStatus.COMPLETED, run.error
    assert [name for name, _ in _calls(run)] == [
        "data_query",
        "data_query",
        "delegate_to_agent",
        "notify_user",
    ]
    with tenancy.agency_context(demo_agency.id):
        child = Execution.objects.select_related("agent").get(parent=run)
        sent = list(
            AgentMessage.objects.filter(from_execution__in=[run, child])
            .order_by("sent_at")
            .values_list("from_execution_id", "to_execution_id", "message_type")
        )
        task = Task.objects.get(agent__slug=RENEWAL_MANAGER)
        (note,) = Note.objects.select_related("contact").filter(agent__slug=RENEWAL_MANAGER)
    assert (child.agent.slug, child.trigger_type) == (RENEWAL_MANAGER, TriggerType.AGENT)
    assert child.status == ExecutionStatus.COMPLETED, child.error
    # It opened the customer the orchestrator named, logged the check-in and made a task.
    assert [name for name, _ in _calls(child)] == ["crm_get_contact", "crm_add_note", "task_create"]
    assert "Renewal check-in with" in note.content
    assert note.contact is not None
    assert note.contact.status == "customer"
    assert sent == [
        (run.id, child.id, MessageType.TASK_DELEGATION),
        (child.id, run.id, MessageType.RESULT),
    ]
    # The answer says what happened: a delegation, and what the other agent did.
    assert f"Delegated the renewal check-in to the {RENEWAL_MANAGER} agent" in run.output
    assert f"Created the task “{task.title}”" in run.output  # (the renewal manager's words)
    assert "for the team" not in run.output  # the orchestrator made no task itself
    assert run.stop_reason == StopReason.FINAL_ANSWER


def test_a_second_run_of_a_conversation_acts_on_its_own_instruction(
    demo_agency: Agency, demo_model: DemoModelServer, celery_worker: Worker
) -> None:
    user = UserFactory.create()
    asked = "Follow up with Priya Raman about pricing."
    first = wait_for(
        _start(demo_agency, "alex", "Follow up with Marcus Oyelaran.", user_id=user.pk)
    )
    assert first.status == ExecutionStatus.COMPLETED, first.error
    _wait_for_conversation(first, messages=2)  # the after-run task adds its turns

    second = wait_for(_start(demo_agency, "alex", asked, user_id=user.pk))

    assert second.status == ExecutionStatus.COMPLETED, second.error
    with tenancy.agency_context(demo_agency.id):
        searched = ToolCall.objects.get(execution=second, tool_name="crm_search_contacts")
    assert searched.input["query"] == "Priya Raman"
    assert "Priya Raman" in second.output
    assert "Marcus" not in second.output
    # It did continue the conversation: its model calls carried the first run's turns.
    first_call = next(r for r in demo_model.requests if r.messages[-1].get("content") == asked)
    assert [m["content"] for m in first_call.messages if m["role"] == "user"] == [
        "Follow up with Marcus Oyelaran.",
        asked,
    ]


def _wait_for_conversation(execution: Execution, *, messages: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with tenancy.agency_context(execution.agency_id):
            held = Conversation.objects.filter(agent_id=execution.agent_id).values_list(
                "message_count", flat=True
            )
            if any(count >= messages for count in held):
                return
        time.sleep(0.1)
    raise AssertionError(f"no conversation of {messages} messages after {timeout} s")


def _learned(execution: Execution, timeout: float = 60) -> Execution:
    """``execution`` once its after-run work (memory.after_run) is done."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with tenancy.agency_context(execution.agency_id):
            fresh = Execution.objects.get(pk=execution.pk)
        if DONE_KEY in (fresh.result or {}):
            return fresh
        time.sleep(0.2)
    raise AssertionError(f"the after-run work of {execution.pk} not done after {timeout} s")


def test_the_demo_agents_remember_what_they_did_and_the_next_run_recalls_it(
    demo_agency: Agency, demo_model: DemoModelServer, celery_worker: Worker
) -> None:
    with tenancy.agency_context(demo_agency.id):  # the seed's own memory, for the walk-through
        seeded = Memory.objects.get(agent__slug="sdr-agent")
        marcus = Contact.objects.get(agency=demo_agency, last_name="Oyelaran")
    assert "Priya Raman" in seeded.content

    first = wait_for(_start(demo_agency, "alex", "Follow up with Marcus Oyelaran about his demo."))
    assert first.status == ExecutionStatus.COMPLETED, first.error
    learned = _learned(first)

    assert learned.result["memory_extraction"]["stored"] == 2, learned.result
    with tenancy.agency_context(demo_agency.id):
        memories = list(
            Memory.objects.filter(agent__slug="alex", subject_id=marcus.id)
            .order_by("content")
            .values_list("memory_type", "content", "execution_id")
        )
    assert memories == [
        (
            "fact",
            "Marcus Oyelaran is Operations Director at Brightline Logistics (CRM status: lead).",
            first.id,
        ),
        (
            "fact",
            "Request about Marcus Oyelaran (Brightline Logistics): “Follow up with Marcus "
            "Oyelaran about his demo.”.",
            first.id,
        ),
    ]

    second = wait_for(_start(demo_agency, "alex", "Book a call with Marcus Oyelaran."))

    assert second.status == ExecutionStatus.COMPLETED, second.error
    recalled = second.config_snapshot["memories"]
    assert any("Operations Director at Brightline Logistics" in line for line in recalled)
    with tenancy.agency_context(demo_agency.id):
        noting = ExecutionStep.objects.get(
            execution=second, step_type="act", tool_name="crm_add_note"
        )
        thought = (
            ExecutionStep.objects.filter(
                execution=second, step_type="think", step_number__lt=noting.step_number
            )
            .order_by("-step_number")
            .values_list("reasoning", flat=True)
            .first()
        )
    assert thought is not None
    assert thought.startswith("From memory: "), thought  # the run says what it recalled
    assert "Marcus Oyelaran is Operations Director at Brightline Logistics" in thought
