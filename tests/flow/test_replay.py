"""Replay (dry) and retry from here, on runs recorded by a real Celery worker against the fake
provider server.

Replay: the recorded replies decided again against the current tools apply no side effect (no
CRM row, no e-mail, no tool call or step written) and report no difference; after a change of
tools (a tool denied to the agent, a schema that now refuses the arguments, a risk rule that now
requires approval) they report it. Retry from here: a new run, child of the original, starts
with the original's history up to the step and completes."""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse

from agents.models import Agent, Execution, ExecutionStatus, StepType, TriggerType
from agents.services import execution_create
from approvals.models import RiskLevel
from core import tenancy
from core.exceptions import ApplicationError
from core.models import Role
from crm.models import Contact, EmailMessage, Note
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import by_turn, text_reply, tool_call_reply
from flow.replay.engine import replay_execution
from flow.replay.retry import execution_retry_from
from tests.agents.factories import ExecutionFactory
from tests.approvals.factories import RiskRuleFactory
from tests.factories import MembershipFactory
from tests.processes import Worker, wait_for
from tools.models import Tool, ToolCall

pytestmark = pytest.mark.slow
DRAFT = {"to": ["ada@example.com"], "subject": "Your plan", "body": "Hello Ada, ..."}


@pytest.fixture
def agent(make_agent: Callable[..., Agent]) -> Agent:
    return make_agent(allowed_tools=["crm_*", "email_*"])


def _contact(agent: Agent) -> Contact:
    with tenancy.agency_context(agent.agency_id):
        return Contact.objects.create(
            agency_id=agent.agency_id, first_name="Ada", last_name="Lovelace",
            email="ada@example.com",
        )  # fmt: skip


def _recorded_run(agent: Agent, server: FakeProviderServer) -> Execution:
    """Looks Ada up, notes the call on her record, drafts her an e-mail, answers."""
    contact = _contact(agent)
    server.set_responder(
        by_turn(
            tool_call_reply("crm_get_contact", {"email": "ada@example.com"}),
            tool_call_reply("crm_add_note", {"contact_id": str(contact.id), "content": "Called."}),
            tool_call_reply("email_draft", DRAFT),
            text_reply("Noted, and drafted Ada an e-mail."),
        ),
        key=agent.llm_model,
    )
    with tenancy.agency_context(agent.agency_id):
        execution = execution_create(agent=agent, input="Ada called about pricing.")
    assert execution is not None
    done = wait_for(execution)
    assert done.status == ExecutionStatus.COMPLETED, done.error
    return done


def _counts(agent: Agent) -> dict[str, int]:
    with tenancy.agency_context(agent.agency_id):
        return {
            "notes": Note.objects.count(),
            "emails": EmailMessage.objects.count(),
            "tool_calls": ToolCall.objects.count(),
            "runs": Execution.objects.count(),
            "steps": sum(e.steps.count() for e in Execution.objects.all()),
        }


def _replay(execution: Execution) -> Any:
    with tenancy.agency_context(execution.agency_id):
        return replay_execution(Execution.objects.select_related("agent").get(pk=execution.pk))


@pytest.fixture
def draft_schema() -> Iterator[Tool]:
    """email_draft (a platform tool), its schema put back after the test."""
    with tenancy.platform_context():
        tool = Tool.objects.get(name="email_draft", agency__isnull=True)
    schema = tool.parameters_schema
    yield tool
    with tenancy.platform_context():
        Tool.objects.filter(pk=tool.pk).update(parameters_schema=schema)


def test_replay_applies_no_side_effect_reports_no_difference_then_reports_tool_changes(
    agent: Agent,
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
    draft_schema: Tool,
) -> None:
    execution = _recorded_run(agent, fake_llm_server)
    before = _counts(agent)
    assert (before["notes"], before["emails"]) == (1, 1)
    requests = len(fake_llm_server.requests_for(agent.llm_model))

    report = _replay(execution)

    assert _counts(agent) == before  # no CRM row, no e-mail, nothing recorded
    assert len(fake_llm_server.requests_for(agent.llm_model)) == requests  # no model call
    assert report.replies == 4
    assert [c.tool_name for c in report.calls] == ["crm_get_contact", "crm_add_note", "email_draft"]
    assert report.differences == 0
    for call in report.calls:
        assert (call.original.access, call.original.validation, call.original.risk) == (
            "allowed", "valid", "none",
        )  # fmt: skip
        assert call.replayed.result == {
            "dry_run": True, "would_call": call.tool_name, "arguments": call.arguments,
        }  # fmt: skip
    assert report.final_answer == "Noted, and drafted Ada an e-mail."
    out = io.StringIO()
    call_command("replay_execution", str(execution.pk), stdout=out)
    assert out.getvalue().rstrip().endswith("No difference.")

    # The tools change: the note tool is denied to the agent, the draft's schema wants a field
    # the recorded call lacks, and a risk rule now asks approval for looking contacts up.
    with tenancy.agency_context(agent.agency_id):
        Agent.objects.filter(pk=agent.pk).update(denied_tools=["crm_add_note"])
    with tenancy.platform_context():
        schema = {**draft_schema.parameters_schema}
        schema["required"] = [*schema.get("required", []), "reply_to"]
        schema["properties"] = {**schema["properties"], "reply_to": {"type": "string"}}
        Tool.objects.filter(pk=draft_schema.pk).update(parameters_schema=schema)
    RiskRuleFactory.create(
        agency=agent.agency, name="Look-ups", tool_pattern="crm_get_*",
        risk_level=RiskLevel.MEDIUM, requires_approval=True,
    )  # fmt: skip

    changed = _replay(execution)

    assert _counts(agent) == before
    by_tool = {c.tool_name: c for c in changed.calls}
    assert by_tool["crm_add_note"].replayed.access == "tool_not_allowed"
    assert by_tool["crm_add_note"].differences[0].startswith("now refused (tool_not_allowed)")
    assert by_tool["email_draft"].replayed.validation == "invalid"
    assert "reply_to" in by_tool["email_draft"].differences[0]
    assert by_tool["email_draft"].differences[0].startswith("the schema now refuses")
    assert by_tool["crm_get_contact"].replayed.risk == "approval required"
    assert by_tool["crm_get_contact"].differences == (
        "now requires approval: Risk rule 'Look-ups': medium (medium)",
    )
    assert changed.differences == 3
    out = io.StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("replay_execution", str(execution.pk), "--json", stdout=out)
    assert exited.value.code == 1
    assert json.loads(out.getvalue())["differences"] == 3


def test_retry_from_a_step_starts_a_child_run_with_the_same_history_that_completes(
    agent: Agent,
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
    client: Client,
) -> None:
    execution = _recorded_run(agent, fake_llm_server)
    with tenancy.agency_context(agent.agency_id):
        steps = list(execution.steps.order_by("step_number"))
    # Step 4: the model's reply that called crm_add_note (observe, think, act, think).
    assert [s.step_type for s in steps[:4]] == ["observe", "think", "act", "think"]
    assert (steps[3].llm_response or {})["message"]["tool_calls"][0]["name"] == "crm_add_note"
    fake_llm_server.set_responder(
        by_turn(then=text_reply("Done again, from step 4.")), key=agent.llm_model
    )
    seen = len(fake_llm_server.requests_for(agent.llm_model))
    staff = MembershipFactory.create(agency=agent.agency, role=Role.STAFF).user
    client.force_login(staff)
    url = reverse("admin:agents_execution_retry", args=[execution.pk, 4])

    confirm = client.get(url)
    assert confirm.status_code == 200
    assert "Retry from step 4" in confirm.content.decode()
    response = client.post(url)

    assert response.status_code == 302
    with tenancy.agency_context(agent.agency_id):
        retry = Execution.objects.exclude(pk=execution.pk).get(parent=execution)
    assert response["Location"] == reverse("admin:agents_execution_change", args=[retry.pk])
    done = wait_for(retry)
    assert done.status == ExecutionStatus.COMPLETED, done.error
    assert done.output == "Done again, from step 4."
    assert (done.trigger_type, done.input, done.triggered_by_id) == (
        TriggerType.MANUAL, execution.input, staff.pk,
    )  # fmt: skip
    assert done.initial_context["retry_of"] == {"execution_id": str(execution.pk), "step": 4}
    with tenancy.agency_context(agent.agency_id):
        copied = list(done.steps.order_by("step_number"))
        notes = Note.objects.filter(contact__email="ada@example.com").count()
    # The same first four steps, then the pending call of step 4 ran live, then the answer.
    for original, copy in zip(steps[:4], copied[:4], strict=True):
        assert (copy.step_number, copy.step_type, copy.tool_name, copy.llm_response) == (
            original.step_number, original.step_type, original.tool_name, original.llm_response,
        )  # fmt: skip
    assert [(s.step_type, s.tool_name) for s in copied[4:]] == [
        (StepType.ACT, "crm_add_note"), (StepType.THINK, ""),
    ]  # fmt: skip
    assert notes == 2  # the original's note and the retry's: it ran live
    # The model was asked once, with the original's history up to step 4 and the note's result.
    requests = fake_llm_server.requests_for(agent.llm_model)[seen:]
    assert len(requests) == 1
    assert requests[0].assistant_turns == 2  # the two copied replies (steps 2 and 4)
    assert len(requests[0].tool_results) == 2  # crm_get_contact's (copied) and crm_add_note's


def test_retry_is_refused_for_a_step_the_run_does_not_have_and_for_a_viewer(
    agent: Agent,
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
    client: Client,
) -> None:
    execution = _recorded_run(agent, fake_llm_server)
    with tenancy.agency_context(agent.agency_id), pytest.raises(ApplicationError) as refused:
        execution_retry_from(execution=execution, step_number=99, triggered_by_id=None)
    assert refused.value.code == "no_such_step"
    viewer = MembershipFactory.create(agency=agent.agency, role=Role.VIEWER).user
    client.force_login(viewer)
    retry_url = reverse("admin:agents_execution_retry", args=[execution.pk, 2])
    replay_url = reverse("admin:agents_execution_replay", args=[execution.pk])
    assert client.post(retry_url).status_code == 403
    # The replay page is for every member who may see the run; another agency's is a 404.
    page = client.get(replay_url)
    assert page.status_code == 200
    assert "No difference from the original run." in page.content.decode()
    with tenancy.agency_context(agent.agency_id):
        assert Execution.objects.filter(parent=execution).count() == 0
    stranger = MembershipFactory.create(role=Role.ADMIN).user
    client.force_login(stranger)
    assert client.get(replay_url).status_code == 404
    assert client.post(retry_url).status_code == 404
    missing = reverse("admin:agents_execution_replay", args=[uuid.uuid4()])
    assert client.get(missing).status_code == 404


@pytest.mark.django_db
def test_the_command_refuses_a_bad_id_an_unknown_run_and_a_run_still_going() -> None:
    running = ExecutionFactory.create(status=ExecutionStatus.RUNNING)
    for argument, message in [
        ("not-a-uuid", "Not a run id"),
        (str(uuid.uuid4()), "No run"),
        (str(running.pk), "only a run that has ended can be replayed"),
    ]:
        with pytest.raises(CommandError, match=message):
            call_command("replay_execution", argument, stdout=io.StringIO())
