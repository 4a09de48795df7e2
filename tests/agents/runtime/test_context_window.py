"""The context window (agents/runtime/context_window.py): a run's history sent to the model stays
under the agent's context_token_budget; older turns are summarised by the model (a ``reflect``
step, counted like any model call), a tool call is never sent without its result, and the model
still sees the instruction and the summary. In the run itself (fake provider, real PostgreSQL)
and through a real worker."""

from __future__ import annotations

import datetime
import itertools
import json
import threading
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest

from agents.llm import Message, ToolCall
from agents.models import Agent, Execution, ExecutionStatus, StepType
from agents.runtime.context_window import (
    CHARS_PER_TOKEN,
    SUMMARISER_PROMPT,
    SUMMARY_HEADER,
    ContextWindow,
    request_chars,
)
from agents.runtime.loop import run_execution
from agents.services import execution_create
from core import tenancy
from crm.models import Contact
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import RecordedRequest, Step, text_reply, tool_call_reply
from tests.processes import Worker, pending_execution, wait_for
from usage.models import ModelPrice, UsageDaily

SUMMARISER = SUMMARISER_PROMPT.split(".")[0]
INSTRUCTION = "Look Ada up again and again, then say you are done."


# --- the window alone ---------------------------------------------------------------------------


def _turn(n: int, result_chars: int = 400) -> list[Message]:
    call = ToolCall.from_raw(
        id=f"call_{n}", name="crm_get_contact", raw_arguments=json.dumps({"n": n})
    )
    return [
        Message.assistant("", (call,)),
        Message.tool_result(f"call_{n}", json.dumps({"n": n, "pad": "x" * result_chars})),
    ]


def _head() -> list[Message]:
    return [Message.system("You help."), Message.user(INSTRUCTION)]


def test_a_history_within_the_budget_is_sent_whole_without_a_copy() -> None:
    messages = _head() + _turn(1) + _turn(2)
    window = ContextWindow(10_000, head=2)
    assert window.due(messages) is None
    assert window.request(messages) is messages
    assert window.tokens == request_chars(messages) // CHARS_PER_TOKEN


def test_no_budget_never_summarises_however_long_the_history() -> None:
    messages = _head() + [m for n in range(500) for m in _turn(n)]
    window = ContextWindow(0, head=2)
    assert window.due(messages) is None
    assert window.request(messages) is messages


def test_past_the_budget_the_oldest_turns_are_due_whole_and_the_latest_is_kept() -> None:
    messages = _head()
    window = ContextWindow(1000, head=2)  # 4,000 characters
    for n in itertools.count():
        messages += _turn(n)
        due = window.due(messages)
        if due is not None:
            break
    assert due is not None
    turns, covered = due
    assert 0 < covered < n + 1  # some, never the latest
    assert turns == messages[2 : 2 + 2 * covered]  # whole turns: each call with its result
    window.summarised_into("You looked Ada up many times.", covered)
    sent = window.request(messages)
    assert sent[0] == messages[0]
    assert sent[1].role == "user"
    assert sent[1].content.startswith(INSTRUCTION)
    assert f"{SUMMARY_HEADER}\nYou looked Ada up many times." in sent[1].content
    assert sent[2:] == messages[2 + 2 * covered :]
    assert request_chars(sent) <= 1000 * CHARS_PER_TOKEN


def test_a_long_history_keeps_every_request_under_the_budget_with_pairs_together() -> None:
    budget = 1500
    messages = _head()
    window = ContextWindow(budget, head=2)
    sizes = []
    for n in range(500):
        messages += _turn(n, result_chars=(n * 37) % 900)  # results of varied sizes
        due = window.due(messages)
        if due is not None:
            window.summarised_into(f"Summary after {due[1]} turns.", due[1])
        sent = window.request(messages)
        sizes.append(request_chars(sent))
        _assert_pairs_together(sent)
    assert max(sizes) <= budget * CHARS_PER_TOKEN
    assert window.summaries > 10
    assert request_chars(messages) > 40 * budget * CHARS_PER_TOKEN  # what it would have sent


def test_a_result_too_long_for_the_budget_is_shortened_in_the_request_only() -> None:
    messages = _head() + _turn(1, result_chars=20_000)
    window = ContextWindow(1000, head=2)
    assert window.due(messages) is None  # nothing older to summarise; the result is capped
    sent = window.request(messages)
    assert len(sent[3].content) <= 1000 * CHARS_PER_TOKEN // 4 + 120
    assert "more characters not shown" in sent[3].content
    assert sent[3].tool_call_id == "call_1"
    assert len(messages[3].content) > 20_000  # the history itself is untouched


def test_a_resumed_window_sends_what_the_run_sent_before() -> None:
    messages = _head() + [m for n in range(40) for m in _turn(n)]
    first = ContextWindow(1000, head=2)
    due = first.due(messages)
    assert due is not None
    first.summarised_into("S", due[1])
    resumed = ContextWindow(1000, head=2)
    resumed.restore(summary="S", turns=due[1], summaries=1)
    assert resumed.due(messages) is None
    assert resumed.request(messages) == first.request(messages)


def _assert_pairs_together(sent: list[Message]) -> None:
    """Every tool result right after the reply that called it; every call answered."""
    open_calls: set[str] = set()
    for message in sent:
        if message.role == "tool":
            assert message.tool_call_id in open_calls, message.tool_call_id
            open_calls.discard(message.tool_call_id)
            continue
        assert not open_calls, f"calls without results: {open_calls}"
        open_calls = {call.id for call in message.tool_calls}
    assert not open_calls


# --- in a run -----------------------------------------------------------------------------------


class LongRun:
    """The fake model of a long run: ``iterations`` lookups then a final answer, and a summary
    whenever the runtime asks for one; every request recorded as sent."""

    def __init__(self, iterations: int, email: str) -> None:
        self.iterations = iterations
        self.email = email
        self.calls = 0
        self.summaries = 0
        self.lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> Step:
        with self.lock:
            if (request.system or "").startswith(SUMMARISER):
                self.summaries += 1
                return text_reply(f"SUMMARY {self.summaries}: you looked Ada up.")
            self.calls += 1
            if self.calls > self.iterations:
                return text_reply("Done.")
            return tool_call_reply("crm_get_contact", {"email": self.email})


def _run_requests(server: FakeProviderServer, model: str) -> list[RecordedRequest]:
    return [r for r in server.requests_for(model) if not (r.system or "").startswith(SUMMARISER)]


def _wire_chars(request: RecordedRequest) -> int:
    """The request's messages as the window counts them: contents and tool-call arguments."""
    total = 0
    for message in request.messages:
        content = message.get("content")
        total += len(content) if isinstance(content, str) else len(json.dumps(content))
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            total += len(function.get("arguments", "")) + len(function.get("name", ""))
            total += len(call.get("id", ""))
        total += 16
    return total


def _assert_wire_pairs(request: RecordedRequest) -> None:
    """OpenAI wire: each tool message answers a call of the assistant message just before."""
    expected: set[str] = set()
    for message in request.messages:
        if message.get("role") == "tool":
            assert message["tool_call_id"] in expected
            expected.discard(message["tool_call_id"])
            continue
        assert not expected
        expected = {call["id"] for call in message.get("tool_calls") or []}
    assert not expected


def _contact(agent: Agent) -> str:
    email = "ada@example.com"
    with tenancy.agency_context(agent.agency_id):
        Contact.objects.create(
            agency_id=agent.agency_id, first_name="Ada", last_name="Lovelace", email=email
        )
    return email


def _steps(execution: Execution) -> list[tuple[str, str, dict[str, Any] | None]]:
    with tenancy.agency_context(execution.agency_id):
        return list(
            execution.steps.order_by("step_number").values_list(
                "step_type", "output_text", "llm_response"
            )
        )


def test_a_long_run_summarises_its_history_and_counts_the_summaries(
    make_agent: Callable[..., Agent], fake_llm_server: FakeProviderServer
) -> None:
    budget = 1000
    agent = make_agent(
        allowed_tools=["crm_get_contact"],
        context_token_budget=budget,
        max_steps_per_run=40,
        loop_threshold=0,  # one lookup repeated on purpose (flow/loops.py would stop it)
    )
    model = LongRun(iterations=30, email=_contact(agent))
    fake_llm_server.set_responder(model, key=agent.llm_model)
    with tenancy.agency_context(agent.agency_id):
        ModelPrice.objects.create(
            agency_id=agent.agency_id,
            provider="openai",
            model=agent.llm_model,
            input_per_mtok=Decimal(1),
            output_per_mtok=Decimal(2),
        )
    execution = pending_execution(agent, input_text=INSTRUCTION)
    run_execution(execution.id, agency_id=execution.agency_id)
    with tenancy.agency_context(agent.agency_id):
        execution = Execution.objects.get(pk=execution.pk)

    # 30 lookups and the answer are 31 steps of max_steps_per_run's 40: summaries do not count.
    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    assert model.summaries >= 2
    steps = _steps(execution)
    reflections = [(text, record) for kind, text, record in steps if kind == StepType.REFLECT]
    assert [text for text, _ in reflections] == [
        f"SUMMARY {n}: you looked Ada up." for n in range(1, model.summaries + 1)
    ]
    assert all(record and record["context_summary"]["turns"] > 0 for _, record in reflections)
    assert execution.llm_call_count == 31 + model.summaries  # counted like any model call

    requests = _run_requests(fake_llm_server, agent.llm_model)
    assert len(requests) == 31
    for request in requests:
        _assert_wire_pairs(request)
        assert _wire_chars(request) <= budget * CHARS_PER_TOKEN
        assert request.messages[1]["content"].startswith(INSTRUCTION)
    assert SUMMARY_HEADER in requests[-1].messages[1]["content"]
    assert f"SUMMARY {model.summaries}:" in requests[-1].messages[1]["content"]
    # Each summary request folds earlier turns into the last summary.
    summary_requests = [
        r
        for r in fake_llm_server.requests_for(agent.llm_model)
        if (r.system or "").startswith(SUMMARISER)
    ]
    assert "SUMMARY 1:" in summary_requests[1].messages[-1]["content"]

    # The summaries' tokens and cost are the run's, and so the day's usage.
    with tenancy.agency_context(agent.agency_id):
        usage = UsageDaily.objects.get(agent_id=agent.id)
    assert usage.llm_calls == execution.llm_call_count
    assert usage.cost_usd == execution.cost_usd > 0


@pytest.mark.slow
def test_a_long_run_through_a_real_worker_keeps_each_request_under_the_budget(
    make_agent: Callable[..., Agent], fake_llm_server: FakeProviderServer, celery_worker: Worker
) -> None:
    budget = 2000
    iterations = 250  # 500 steps, and the summaries
    agent = make_agent(
        allowed_tools=["crm_get_contact"],
        context_token_budget=budget,
        max_steps_per_run=iterations + 1,
        timeout_seconds=600,
        loop_threshold=0,  # one lookup repeated on purpose (flow/loops.py would stop it)
    )
    model = LongRun(iterations=iterations, email=_contact(agent))
    fake_llm_server.set_responder(model, key=agent.llm_model)
    with tenancy.agency_context(agent.agency_id):
        started = execution_create(agent=agent, input=INSTRUCTION)
    assert started is not None
    execution = wait_for(started, timeout=300)

    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    requests = _run_requests(fake_llm_server, agent.llm_model)
    assert len(requests) == iterations + 1
    sizes = [_wire_chars(r) for r in requests]
    assert max(sizes) <= budget * CHARS_PER_TOKEN
    for request in requests:
        _assert_wire_pairs(request)
        assert request.messages[1]["content"].startswith(INSTRUCTION)
    assert SUMMARY_HEADER in requests[-1].messages[1]["content"]
    # Without the window the last request would have carried every result of the run.
    with tenancy.agency_context(agent.agency_id):
        results = execution.steps.filter(step_type=StepType.ACT).values_list(
            "tool_output", flat=True
        )
        history = sum(len(json.dumps(output)) for output in results)
    assert history > 10 * budget * CHARS_PER_TOKEN
    assert model.summaries >= 10


def test_an_empty_summary_still_leaves_the_summarised_turns_out() -> None:
    messages = _head() + [m for n in range(40) for m in _turn(n)]
    window = ContextWindow(1000, head=2)
    due = window.due(messages)
    assert due is not None
    window.summarised_into("", due[1])
    sent = window.request(messages)
    assert request_chars(sent) <= 1000 * CHARS_PER_TOKEN
    assert "earlier steps are not shown" in sent[1].content


class WaitingLongRun(LongRun):
    """A long run that waits (parks) once, after ``wait_after`` lookups."""

    def __init__(self, iterations: int, email: str, wait_after: int) -> None:
        super().__init__(iterations, email)
        self.wait_after = wait_after

    def __call__(self, request: RecordedRequest) -> Step:
        if not (request.system or "").startswith(SUMMARISER) and self.calls == self.wait_after:
            with self.lock:
                self.calls += 1
            return tool_call_reply("wait", {"seconds": 3600})
        return super().__call__(request)


def test_a_resumed_run_sends_its_summary_and_the_turns_since(
    make_agent: Callable[..., Agent], fake_llm_server: FakeProviderServer
) -> None:
    from agents.services.resume import execution_resume_due

    budget = 1000
    agent = make_agent(
        allowed_tools=["crm_get_contact", "wait"],
        context_token_budget=budget,
        max_steps_per_run=40,
        loop_threshold=0,  # one lookup repeated on purpose (flow/loops.py would stop it)
    )
    model = WaitingLongRun(iterations=24, email=_contact(agent), wait_after=16)
    fake_llm_server.set_responder(model, key=agent.llm_model)
    execution = pending_execution(agent, input_text=INSTRUCTION)

    run_execution(execution.id, agency_id=execution.agency_id)
    with tenancy.agency_context(agent.agency_id):
        parked = Execution.objects.get(pk=execution.pk)
        assert parked.status == ExecutionStatus.WAITING_INPUT
        assert parked.wait_until is not None
        execution_resume_due(parked, now=parked.wait_until + datetime.timedelta(seconds=1))
    summaries_before = model.summaries
    sent_before = len(_run_requests(fake_llm_server, agent.llm_model))
    run_execution(execution.id, agency_id=execution.agency_id)

    with tenancy.agency_context(agent.agency_id):
        execution = Execution.objects.get(pk=execution.pk)
    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    assert summaries_before >= 1
    requests = _run_requests(fake_llm_server, agent.llm_model)
    first_resumed = requests[sent_before]
    assert f"SUMMARY {summaries_before}:" in first_resumed.messages[1]["content"]
    assert "The wait is over" in first_resumed.last_user_text
    for request in requests:
        _assert_wire_pairs(request)
        assert _wire_chars(request) <= budget * CHARS_PER_TOKEN
