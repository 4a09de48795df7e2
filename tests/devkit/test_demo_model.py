"""The demo model (`devkit.fake_server.demo`): the real SDK clients talk to it over both wire
formats, and it plays an agent's run from the tools offered and the results it gets back."""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agents.llm.base import Provider
from agents.llm.factory import get_provider
from agents.llm.types import Message, ProviderConfig, ProviderKind, ToolDefinition
from devkit.fake_server.demo import DEMO_MODEL, DemoModelServer, next_action
from devkit.fake_server.demo.conversation import name_query
from devkit.fake_server.script import RecordedRequest

KINDS: list[ProviderKind] = ["openai", "anthropic", "google"]
PRIYA = {
    "id": "0b9a4c1e-6f7d-4c1b-9a55-2f3c4d5e6f70",
    "name": "Priya Raman",
    "first_name": "Priya",
    "email": "priya.raman@northwind-traders.example",
    "company": "Northwind Traders",
    "job_title": "Head of Growth",
    "status": "lead",
    "tags": ["inbound", "pricing"],
    "recent_notes": [{"kind": "call", "content": "Asked about pricing for 12 seats."}],
}
SDR_TOOLS = ["crm_search_contacts", "crm_get_contact", "crm_add_note", "email_send", "web_search"]


def _crm(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """What the platform's tools would answer, for a CRM holding Priya alone."""
    if name == "crm_search_contacts":
        found = "priya" in arguments.get("query", "").lower() or not arguments.get("query")
        return {"contacts": [PRIYA] if found else [], "count": int(found)}
    if name == "crm_get_contact":
        return {"contact": PRIYA}
    if name == "email_send":
        return {"id": "e1", "status": "queued", "to": arguments["to"]}
    return {"ok": True}


@pytest.fixture(scope="module")
def demo() -> Iterator[DemoModelServer]:
    with DemoModelServer(think_seconds=0, stream_interval=0.001, record=True) as server:
        yield server


@pytest.fixture
def provider(demo: DemoModelServer) -> Iterator[Callable[[ProviderKind], Provider]]:
    built: list[Provider] = []

    def make(kind: ProviderKind) -> Provider:
        url = demo.openai_base_url if kind == "openai" else demo.url
        config = ProviderConfig(kind=kind, model=DEMO_MODEL, api_key="demo", base_url=url)
        built.append(get_provider(config, sleep=lambda _: None))
        return built[-1]

    yield make
    for made in built:
        made.close()


def _run(
    provider: Provider,
    text: str,
    tools: list[str],
    *,
    stream: bool = False,
    earlier: tuple[Message, ...] = (),
) -> tuple[list[str], str, list[str]]:
    """A whole run over the wire (after the ``earlier`` turns of the conversation it continues):
    the tools called, the final answer, and what was streamed."""
    definitions = [ToolDefinition(name=name, description=name) for name in tools]
    messages = [Message.system("You are an SDR."), *earlier, Message.user(text)]
    called: list[str] = []
    streamed: list[str] = []
    for _ in range(10):
        reply = provider.complete(
            messages, definitions, on_text=streamed.append if stream else None
        )
        messages.append(reply.to_message())
        if not reply.tool_calls:
            return called, reply.text, streamed
        for call in reply.tool_calls:
            called.append(call.name)
            output = json.dumps(_crm(call.name, call.arguments))
            messages.append(Message.tool_result(call.id, output))
    raise AssertionError(f"no final answer after {called}")


@pytest.mark.parametrize("kind", KINDS)
def test_the_sdr_play_over_both_wire_formats(
    kind: ProviderKind, provider: Callable[[ProviderKind], Provider], demo: DemoModelServer
) -> None:
    called, answer, _ = _run(provider(kind), "Reach out to Priya Raman, please.", SDR_TOOLS)

    assert called == ["crm_search_contacts", "crm_get_contact", "crm_add_note", "email_send"]
    assert "Priya Raman (Northwind Traders)" in answer
    assert "approved" in answer
    assert {r.wire for r in demo.requests[-5:]} == {kind}
    assert {r.model for r in demo.requests[-5:]} == {DEMO_MODEL}


@pytest.mark.parametrize("kind", KINDS)
def test_a_run_continuing_a_conversation_acts_on_its_own_instruction(
    kind: ProviderKind, provider: Callable[[ProviderKind], Provider]
) -> None:
    earlier = (  # the previous run's turns, as memory.episodes adds them
        Message.user("Reach out to Priya Raman, please."),
        Message.assistant("Worked on Priya Raman (Northwind Traders): scored the lead."),
    )

    called, answer, _ = _run(
        provider(kind), "Reach out to Jonas Becker.", SDR_TOOLS, earlier=earlier
    )

    assert called == ["crm_search_contacts"]  # Jonas, whom this CRM does not hold
    assert "Reach out to Jonas Becker." in answer
    assert "Priya" not in answer


def test_a_streamed_reply_arrives_in_pieces(
    provider: Callable[[ProviderKind], Provider],
) -> None:
    called, answer, streamed = _run(
        provider("openai"), "Reach out to Priya Raman.", SDR_TOOLS, stream=True
    )

    assert called[-1] == "email_send"
    assert len(streamed) > 10  # word by word, thoughts and the final answer
    assert "".join(streamed).endswith(answer)


def _request(
    text: str,
    tools: list[str],
    calls: list[tuple[str, dict[str, Any]]],
    descriptions: dict[str, str] | None = None,
) -> RecordedRequest:
    messages: list[dict[str, Any]] = [{"role": "user", "content": text}]
    for n, (name, output) in enumerate(calls):
        call = {"id": f"c{n}", "type": "function", "function": {"name": name, "arguments": "{}"}}
        messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": json.dumps(output)})
    body = {
        "model": DEMO_MODEL,
        "messages": messages,
        "tools": [
            {"type": "function", "function": {"name": t, **_described(t, descriptions)}}
            for t in tools
        ],
    }
    return RecordedRequest("openai", "/v1/chat/completions", {}, body, None)


def _described(tool: str, descriptions: dict[str, str] | None) -> dict[str, str]:
    description = (descriptions or {}).get(tool)
    return {"description": description} if description else {}


def test_nobody_found_means_no_e_mail_and_an_honest_answer() -> None:
    request = _request(
        "Reach out to Zed Quimby.",
        SDR_TOOLS,
        [("crm_search_contacts", {"contacts": [], "count": 0})],
    )

    answer = next_action(request)

    assert isinstance(answer, str)
    assert "couldn't find a matching contact" in answer


def test_a_failed_tool_is_reported_and_the_run_still_ends() -> None:
    error = {"error": {"code": "not_found", "message": "No contact with that id."}}
    request = _request(
        "Follow up with a3bb189e-8bf9-3888-9912-ace4e6543002",
        ["crm_get_contact", "crm_add_note", "task_create"],
        [("crm_get_contact", error)],
    )

    action = next_action(request, now=datetime.datetime(2030, 1, 4, 12, tzinfo=datetime.UTC))

    assert not isinstance(action, str)
    assert action.tool == "task_create"  # nobody to note it on: a task to find them
    assert action.arguments["due_date"] == "2030-01-07T09:00:00Z"  # two days on, a weekday


def test_an_event_payload_names_the_contact_to_open() -> None:
    contact_id = "0b9a4c1e-6f7d-4c1b-9a55-2f3c4d5e6f70"
    text = (
        'You were triggered with:\n{"trigger": "event", "data": {"event_id": '
        f'"a3bb189e-8bf9-3888-9912-ace4e6543002", "payload": {{"contact_id": "{contact_id}"}}}}}}'
    )
    action = next_action(_request(text, SDR_TOOLS, []))

    assert not isinstance(action, str)
    assert (action.tool, action.arguments) == ("crm_get_contact", {"contact_id": contact_id})


@pytest.mark.parametrize(
    ("text", "query"),
    [
        ("Please follow up with Priya Raman about pricing.", "Priya Raman"),
        ("Research Northwind Traders before Friday", "Northwind Traders"),
        ("Call Liam O'Connor's office", "Liam O'Connor"),
        ("What's new with Emma?", "Emma"),
        ("what's new?", ""),
        ('You were triggered with:\n{"trigger": "manual", "data": {}}', ""),
    ],
)
def test_the_name_searched_for_is_the_first_one_in_the_request(text: str, query: str) -> None:
    assert name_query(text) == query


def test_an_assistant_asked_about_nobody_hands_the_request_over_as_a_task() -> None:
    tools = ["crm_search_contacts", "crm_get_contact", "crm_add_note", "task_create"]

    action = next_action(_request("Plan the team offsite, please.", tools, []))

    assert not isinstance(action, str)
    assert action.tool == "task_create"
    assert action.arguments["title"] == "Look into: Plan the team offsite, please."


def test_an_agent_without_tools_gets_a_plain_labelled_answer() -> None:
    answer = next_action(_request("Hello there", [], []))

    assert isinstance(answer, str)
    assert answer.startswith("(demo model: scripted, no AI)")


ASSISTANT_TOOLS = ["crm_search_contacts", "crm_get_contact", "crm_add_note", "task_create"]


def test_an_assistant_that_may_ask_asks_before_handing_over_a_request_about_nobody() -> None:
    action = next_action(
        _request("Plan the team offsite, please.", [*ASSISTANT_TOOLS, "ask_user"], [])
    )

    assert not isinstance(action, str)
    assert action.tool == "ask_user"
    assert "Plan the team offsite" in action.arguments["question"]
    assert action.arguments["options"][1].startswith("No")


@pytest.mark.parametrize(
    ("answer", "then"),
    [("Yes, create a task for the team", "task_create"), ("No, leave it", None)],
)
def test_the_answer_decides_whether_the_task_is_created(answer: str, then: str | None) -> None:
    request = _request(
        "Plan the team offsite, please.",
        [*ASSISTANT_TOOLS, "ask_user"],
        [("ask_user", {"answer": answer})],
    )

    action = next_action(request)

    if then is None:
        assert isinstance(action, str)
        assert "no task was created" in action
    else:
        assert not isinstance(action, str)
        assert action.tool == then


ORCHESTRATOR_TOOLS = ["data_query", "task_create", "notify_user", "trigger_workflow"]
TEAM = (  # the delegate tool's description, as teams.runtime writes it
    "Hand a sub-task to another agent.\n\nAgents you may delegate to (pass the slug as "
    "'agent'):\n- alex: Alex (Personal assistant)\n- renewal-manager: Renewal Manager (takes "
    "the renewal check-ins)"
)
CUSTOMER = {
    "id": "c1",
    "first_name": "Rachel",
    "last_name": "Goldberg",
    "company": "Meridian Legal",
    "email": "rachel@meridian.example",
    "status": "customer",
}
REVIEWED: list[tuple[str, dict[str, Any]]] = [
    ("data_query", {"rows": [CUSTOMER]}),
    ("data_query", {"rows": []}),  # no open task covers her
]


def test_an_orchestrator_delegates_to_the_agent_its_team_lists_for_renewals() -> None:
    tools = [*ORCHESTRATOR_TOOLS, "delegate_to_agent"]

    action = next_action(_request("", tools, REVIEWED, {"delegate_to_agent": TEAM}))

    assert not isinstance(action, str)
    assert (action.tool, action.arguments["agent"]) == ("delegate_to_agent", "renewal-manager")
    assert (
        "Rachel Goldberg (Meridian Legal) <rachel@meridian.example>"
        in (action.arguments["instruction"])
    )


@pytest.mark.parametrize(
    ("tools", "delegated"),
    [
        (ORCHESTRATOR_TOOLS, []),  # nobody to delegate to
        (
            [*ORCHESTRATOR_TOOLS, "delegate_to_agent"],
            [("delegate_to_agent", {"error": {"code": "delegated_run_failed", "message": "x"}})],
        ),
    ],
)
def test_an_orchestrator_that_cannot_delegate_creates_the_task_itself_and_says_so(
    tools: list[str], delegated: list[tuple[str, dict[str, Any]]]
) -> None:
    descriptions = {"delegate_to_agent": TEAM}
    action = next_action(_request("", tools, [*REVIEWED, *delegated], descriptions))
    assert not isinstance(action, str)
    assert action.tool == "task_create"

    title = "Renewal check-in with Rachel Goldberg (Meridian Legal)"
    done = [*REVIEWED, *delegated, ("task_create", {"task": {"title": title}})]
    done.append(("notify_user", {"ok": True}))
    answer = next_action(_request("", tools, done, descriptions))

    assert isinstance(answer, str)
    assert f"Created the task “{title}” for the team." in answer
    assert "Delegated" not in answer


def _delivery(payload: dict[str, Any]) -> str:
    """A webhook delivery as the run's first message (Execution.first_user_message)."""
    data = {
        "webhook": {"id": "a3bb189e-8bf9-3888-9912-ace4e6543002", "name": "Website enquiries"},
        "delivery_id": "enquiry-1",
        "payload": payload,
    }
    return "You were triggered with:\n" + json.dumps({"trigger": "webhook", "data": data}, indent=1)


def test_a_webhook_delivery_is_not_taken_for_a_contact_id_and_is_described_in_words() -> None:
    tools = [*ASSISTANT_TOOLS, "ask_user"]
    order = _delivery({"order": {"id": 1042, "status": "paid"}})

    action = next_action(_request(order, tools, []))

    assert not isinstance(action, str)
    assert action.tool == "crm_search_contacts"  # the webhook's id is no contact's
    enquiry = _delivery({"email": PRIYA["email"], "message": "Could we see a demo?"})
    first = next_action(_request(enquiry, tools, []))
    assert not isinstance(first, str)
    assert (first.tool, first.arguments) == ("crm_get_contact", {"email": PRIYA["email"]})
    note = next_action(_request(enquiry, tools, [("crm_get_contact", {"contact": PRIYA})]))
    assert not isinstance(note, str)
    assert note.tool == "crm_add_note"
    assert note.arguments["content"].startswith(
        "Request: a delivery of the “Website enquiries” webhook: “Could we see a demo?”."
    )
