"""A run's Mermaid diagrams: the text of a known run (built with factories, fixed times) is
exactly the expected diagram; labels from tool names, arguments, model text and answers cannot
break out of their line or carry HTML; the run page embeds both diagrams and the ``.mmd``
downloads are for the run's agency's staff only."""

from __future__ import annotations

import datetime
import re
import uuid
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from agents.admin.panels import STEP_PLACEHOLDER
from agents.models import (
    Agent,
    Execution,
    ExecutionStatus,
    MessageType,
    StepType,
    TransitionType,
)
from approvals.models import Approval, ApprovalStatus, Question, QuestionStatus
from core import tenancy
from core.models import Role
from flow.diagrams import flow_record, label, sequence_diagram, state_diagram
from flow.diagrams.records import FlowRecord, StepRow, TransitionRow
from tests.agents.factories import (
    AgentFactory,
    AgentMessageFactory,
    ExecutionFactory,
    ExecutionStepFactory,
    StateTransitionFactory,
)
from tests.approvals.factories import ApprovalFactory, QuestionFactory
from tests.factories import MembershipFactory
from tests.tools.factories import ToolCallFactory

pytestmark = pytest.mark.django_db
T0 = datetime.datetime(2026, 11, 25, 9, 0, tzinfo=datetime.UTC)


def at(seconds: int) -> datetime.datetime:
    return T0 + datetime.timedelta(seconds=seconds)


def reply(*calls: tuple[str, str], text: str = "") -> dict[str, object]:
    tool_calls = [
        {"id": f"call_{n}", "name": name, "raw_arguments": raw, "arguments_error": None}
        for n, (name, raw) in enumerate(calls, start=1)
    ]
    message: dict[str, object] = {"role": "assistant", "content": text}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {"message": message}


def known_run() -> Execution:
    """A run of "Lead qualifier": it looks a contact up, is asked for approval to send an
    e-mail (approved), asks a person which plan, delegates to another agent, gets its result and
    answers; with its state transitions. Every time fixed."""
    agent = AgentFactory.create(name="Lead qualifier")
    helper = AgentFactory.create(agency=agent.agency, site=agent.site, name="Scorer")
    run = ExecutionFactory.create(agent=agent, status=ExecutionStatus.COMPLETED)
    child = ExecutionFactory.create(agent=helper, parent=run, status=ExecutionStatus.COMPLETED)
    steps: list[tuple[int, str, dict[str, Any]]] = [
        (1, StepType.OBSERVE, {"input_text": "Qualify Ada"}),
        (2, StepType.THINK, {"llm_response": reply(("crm_get_contact", '{"email": "ada@x.io"}'))}),
        (3, StepType.ACT, {"tool_name": "crm_get_contact", "tool_input": {"email": "ada@x.io"},
                           "tool_output": {"id": "c1"}}),
        (4, StepType.THINK, {"llm_response": reply(("email_send", '{"to": "ada@x.io"}'))}),
        (6, StepType.ACT, {"tool_name": "email_send", "tool_input": {"to": "ada@x.io"},
                           "tool_output": {"error": {"code": "smtp_down", "message": "no"}}}),
        (7, StepType.THINK, {"llm_response": reply(text="Ada is a good lead."),
                             "output_text": "Ada is a good lead."}),
    ]  # fmt: skip
    seconds = {1: 0, 2: 1, 3: 2, 4: 3, 6: 40, 7: 90}
    for number, kind, fields in steps:
        ExecutionStepFactory.create(
            execution=run, step_number=number, step_type=kind, started_at=at(seconds[number]),
            **fields,
        )  # fmt: skip
    call = ToolCallFactory.create(execution=run, agent=agent, tool_name="email_send")
    approval = ApprovalFactory.create(
        tool_call=call, risk_level="high", status=ApprovalStatus.APPROVED, decided_at=at(30)
    )
    question = QuestionFactory.create(
        execution=run, tool_call__execution=run, tool_call__agent=agent,
        question="Which plan: Basic or Pro?", status=QuestionStatus.ANSWERED,
        user_response="Pro", response_timestamp=at(60),
    )  # fmt: skip
    with tenancy.platform_context():
        Approval.objects.filter(pk=approval.pk).update(created_at=at(10))
        Question.objects.filter(pk=question.pk).update(created_at=at(50))
    AgentMessageFactory.create(
        from_execution=run, to_agent=helper, to_execution=child, sent_at=at(70),
        message_type=MessageType.TASK_DELEGATION,
    )  # fmt: skip
    AgentMessageFactory.create(
        from_execution=child, from_agent=helper, to_agent=agent, to_execution=run,
        sent_at=at(80), message_type=MessageType.RESULT, is_request=False,
    )  # fmt: skip
    transitions = [
        ("", "pending", TransitionType.NORMAL, "created"),
        ("pending", "running", TransitionType.NORMAL, ""),
        ("running", "waiting_approval", TransitionType.NORMAL, "approval_required"),
        ("waiting_approval", "pending", TransitionType.NORMAL, "approval_decided"),
        ("pending", "running", TransitionType.NORMAL, ""),
        ("running", "waiting_agent", TransitionType.NORMAL, "delegated"),
        ("waiting_agent", "pending", TransitionType.NORMAL, "child_finished"),
        ("pending", "running", TransitionType.RETRY, "lease_expired"),
        ("running", "completed", TransitionType.NORMAL, "final_answer"),
    ]
    for sequence, (start, to, how, event) in enumerate(transitions, start=1):
        StateTransitionFactory.create(
            execution=run, sequence=sequence, from_state=start, to_state=to,
            transition_type=how, triggered_by_event=event,
        )  # fmt: skip
    # As the runtime keeps it: the run's broadcast counter is past every transition it numbered.
    # At 0, the run page's socket would replay them all as news and the page would refetch
    # itself (tests/browser/test_flow_diagram.py held parts it swapped).
    with tenancy.platform_context():
        Execution.objects.filter(pk=run.pk).update(sequence=len(transitions))
    run.sequence = len(transitions)
    return run


EXPECTED_SEQUENCE = """\
sequenceDiagram
  participant A as Lead qualifier
  participant M as Model
  participant T1 as crm_get_contact
  actor H as Human
  participant T2 as email_send
  participant X1 as Scorer
  Note over A: #35;1 manual trigger: Qualify Ada
  A->>M: #35;2 think
  M-->>A: call crm_get_contact
  A->>T1: #35;3 email=#quot;ada@x.io#quot;
  T1-->>A: ok
  A->>M: #35;4 think
  M-->>A: call email_send
  A->>H: approve email_send? (high)
  H-->>A: approved
  A->>T2: #35;6 to=#quot;ada@x.io#quot;
  T2-->>A: error smtp_down
  A->>H: Which plan: Basic or Pro?
  H-->>A: Pro
  A->>X1: Task delegation
  X1-->>A: Result
  A->>M: #35;7 think
  M-->>A: Ada is a good lead.
  Note over A: Completed
"""

EXPECTED_STATE = """\
stateDiagram-v2
  state "Pending" as pending
  state "Running" as running
  state "Waiting for approval" as waiting_approval
  state "Waiting for another agent" as waiting_agent
  state "Completed" as completed
  [*] --> pending: created
  pending --> running: (2 times)
  running --> waiting_approval: approval required
  waiting_approval --> pending: approval decided
  running --> waiting_agent: delegated
  waiting_agent --> pending: child finished
  pending --> running: retry
  running --> completed: final answer
  completed --> [*]
"""


def test_the_mermaid_text_of_a_known_run_is_the_expected_diagram() -> None:
    run = known_run()
    with tenancy.agency_context(run.agency_id):
        record = flow_record(Execution.objects.select_related("agent").get(pk=run.pk))

    assert sequence_diagram(record) == EXPECTED_SEQUENCE
    assert state_diagram(record.transitions) == EXPECTED_STATE


def test_an_edge_taken_twice_without_a_label_says_so() -> None:
    pairs = [
        ("", "pending"),
        ("pending", "running"),
        ("running", "pending"),
        ("pending", "running"),
    ]
    rows = [TransitionRow(n, start, to) for n, (start, to) in enumerate(pairs, start=1)]
    assert state_diagram(rows) == (
        'stateDiagram-v2\n  state "Pending" as pending\n  state "Running" as running\n'
        "  [*] --> pending\n  pending --> running: (2 times)\n  running --> pending\n"
    )


# What a model, a tool or a user may write, meant to end the line, add a participant, open a
# comment, directive or HTML, or end the diagram.
HOSTILE = [
    "x\nparticipant Evil\nA->>Evil: pwned",
    "end; Note over A: injected",
    "%%{init: {'securityLevel': 'loose'}}%%",
    '<img src=x onerror="alert(1)"><script>alert(2)</script>',
    'click A callback "alert"',
    "#lt;b#gt; & ] [ } { | ` \\",
    "\u202eevil\x00\x07",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_a_label_is_one_inert_line(text: str) -> None:
    shown = label(text)
    assert "\n" not in shown
    assert "\r" not in shown
    # Nothing Mermaid or HTML reads as syntax is left (entity codes are "#name;" only).
    assert not re.search(r"[;<>\"%{}\[\]|`\\]", re.sub(r"#\w+;", "", shown))
    assert all(ch.isprintable() for ch in shown)
    assert len(label(text * 20)) < 200  # cut, then escaped


def test_hostile_tool_names_arguments_and_answers_stay_inside_their_messages() -> None:
    hostile = HOSTILE[0]
    record = FlowRecord(
        agent_name=hostile,
        status="failed",
        steps=(
            StepRow(1, "observe", T0, input_text=HOSTILE[2]),
            StepRow(2, "think", at(1), tool_calls=((hostile, "{}"),)),
            StepRow(3, "act", at(2), tool_name=HOSTILE[3], tool_input={"q": HOSTILE[1]},
                    error_code=HOSTILE[4]),
            StepRow(4, "think", at(3), output_text=HOSTILE[5]),
        ),
    )  # fmt: skip
    text = sequence_diagram(record)
    lines = text.splitlines()
    assert lines[0] == "sequenceDiagram"
    # One participant line each for the agent, the model and the one tool: nothing added.
    assert [line.split(" as ")[0] for line in lines if " as " in line] == [
        "  participant A", "  participant M", "  participant T1",
    ]  # fmt: skip
    # Every line after the participants is a message or a note between known participants.
    statement = re.compile(r"^  (Note over A: |(A|M|T1)(->>|-->>)(A|M|T1): )[^;<>\"%]*$")
    body = [re.sub(r"#\w+;", "", line) for line in lines[1:] if " as " not in line]
    assert all(statement.match(line) for line in body), body
    assert "<" not in text
    assert "%%" not in text


def test_the_run_page_embeds_both_diagrams_and_their_downloads(client: Client) -> None:
    run = known_run()
    staff = MembershipFactory.create(agency=run.agency, role=Role.VIEWER).user
    client.force_login(staff)

    page = client.get(reverse("admin:agents_execution_change", args=[run.pk]))

    assert page.status_code == 200
    body = page.content.decode()
    assert 'data-flow-diagram="flow-diagram-sequence"' in body
    assert 'data-flow-diagram="flow-diagram-state"' in body
    assert "flow/vendor/mermaid/mermaid.min.js" in body
    sequence_url = reverse("admin:agents_execution_diagram", args=[run.pk, "sequence"])
    state_url = reverse("admin:agents_execution_diagram", args=[run.pk, "state"])
    assert sequence_url in body
    assert state_url in body
    assert reverse("admin:agents_execution_replay", args=[run.pk]) in body

    download = client.get(sequence_url)
    assert download.status_code == 200
    assert download["Content-Disposition"] == f'attachment; filename="run-{run.pk}-sequence.mmd"'
    assert download.content.decode() == EXPECTED_SEQUENCE
    assert client.get(state_url).content.decode() == EXPECTED_STATE
    assert (
        client.get(reverse("admin:agents_execution_diagram", args=[run.pk, "gantt"])).status_code
        == 404
    )
    # "Retry from here" is drawn on the timeline's steps from the link the page carries, for
    # members who may retry (the retry page refuses a viewer); it was a column of the admin's
    # steps table, shown to a viewer too, until issue 27.
    retry_url = reverse("admin:agents_execution_retry", args=[run.pk, STEP_PLACEHOLDER])
    assert retry_url not in body
    member = MembershipFactory.create(agency=run.agency, role=Role.STAFF).user
    client.force_login(member)
    page = client.get(reverse("admin:agents_execution_change", args=[run.pk]))
    assert retry_url in page.content.decode()


def test_another_agencys_run_diagram_is_a_404_and_a_visitor_must_log_in(client: Client) -> None:
    run = known_run()
    url = reverse("admin:agents_execution_diagram", args=[run.pk, "sequence"])
    assert client.get(url).status_code == 302  # to the login page

    other: Agent = AgentFactory.create()
    client.force_login(MembershipFactory.create(agency=other.agency, role=Role.ADMIN).user)
    assert client.get(url).status_code == 404
    missing = reverse("admin:agents_execution_diagram", args=[uuid.uuid4(), "sequence"])
    assert client.get(missing).status_code == 404
