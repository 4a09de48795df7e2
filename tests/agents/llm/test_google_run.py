"""A run on the Google provider end to end: a real Celery worker, real PostgreSQL and Redis, the
real ``google-genai`` client talking to the fake server's Gemini wire, a watcher of the run (its
text streamed token by token), tool calls through the tool executor, and the run's cost from the
platform's Gemini price (usage 0005)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from decimal import Decimal

import pytest

from agents import tasks
from agents.models import Agent, ExecutionStatus, StepType
from core import tenancy
from crm.models import Contact, Note
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import Reply, by_turn, tool_call_reply
from tests.agents.runtime.test_token_streaming import GroupListener
from tests.processes import Worker, pending_execution, wait_for
from tools.models import ToolCall
from usage.models import UsageDaily

pytestmark = pytest.mark.slow

MODEL = "gemini-2.5-flash"  # priced by usage 0005: $0.30 in, $2.50 out, $0.03 cached, per 1M
ANSWER = (
    "I noted on Ada's record that she called about the new plan and its pricing, and that she "
    "would like a quote by Friday."
)


@pytest.fixture
def gemini_script(fake_llm_server: FakeProviderServer) -> Iterator[str]:
    """The fake server's script for the real model name (agents' models are otherwise unique per
    test): taken away after the test, so no other test gets its replies."""
    yield MODEL
    fake_llm_server.set_responder(None, key=MODEL)


def test_a_gemini_run_calls_tools_streams_its_answer_and_costs_the_gemini_price(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
    gemini_script: str,
) -> None:
    agent = make_agent("google", allowed_tools=["crm_*"], llm_model=gemini_script)
    with tenancy.agency_context(agent.agency_id):
        contact = Contact.objects.create(
            agency_id=agent.agency_id, first_name="Ada", last_name="Lovelace",
            email="ada@example.com",
        )  # fmt: skip
    note = {"contact_id": str(contact.id), "content": "Called about pricing; quote by Friday."}
    fake_llm_server.set_responder(
        by_turn(
            tool_call_reply(
                "crm_get_contact", {"email": "ada@example.com"}, input_tokens=1200,
                output_tokens=40, cache_read_tokens=800,
            ),
            tool_call_reply("crm_add_note", note, input_tokens=1500, output_tokens=60),
            # 20 ms between pieces: the publisher batches what arrives while it sends, and on
            # a busy machine 2 ms pieces all fell into one batch (one message, not "streamed").
            Reply(text=ANSWER, input_tokens=1700, output_tokens=36, stream_interval=0.02),
        ),
        key=gemini_script,
    )  # fmt: skip
    execution = pending_execution(agent, input_text="Log that Ada called about pricing.")
    listener = GroupListener(execution)
    try:
        tasks.run_execution.apply_async(
            args=[str(execution.id)], kwargs={"agency_id": str(execution.agency_id)}
        )
        execution = wait_for(execution)
    finally:
        listener.close(until_status={ExecutionStatus.COMPLETED})

    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    assert execution.output == ANSWER
    requests = fake_llm_server.requests_for(gemini_script)
    assert [r.wire for r in requests] == ["google"] * 3
    assert all(r.path.startswith(f"/v1beta/models/{MODEL}:") for r in requests)
    assert requests[0].api_key == "test-key-not-real"  # the agency's key, decrypted
    assert "crm_add_note" in requests[0].tool_names
    assert "Ada" in requests[1].tool_results[0]  # the contact found, told to the model
    with tenancy.agency_context(agent.agency_id):
        steps = list(execution.steps.order_by("step_number"))
        calls = list(
            ToolCall.objects.filter(execution=execution)
            .order_by("created_at")
            .values_list("status", flat=True)
        )
        notes = list(Note.objects.filter(contact=contact).values_list("content", flat=True))
        daily = UsageDaily.objects.get(agent=agent, model=MODEL)
    assert [(s.step_type, s.tool_name) for s in steps] == [
        (StepType.OBSERVE, ""),
        (StepType.THINK, ""),
        (StepType.ACT, "crm_get_contact"),
        (StepType.THINK, ""),
        (StepType.ACT, "crm_add_note"),
        (StepType.THINK, ""),
    ]
    assert calls == ["completed", "completed"]
    assert notes == [note["content"]]
    # The final answer reached the watcher token by token before it was stored.
    final = steps[-1]
    assert listener.streamed(final.step_number) == final.output_text == ANSWER
    assert len([m for m in listener.tokens if m["step_number"] == final.step_number]) > 1
    assert requests[-1].stream
    # Gemini's price: uncached input, output and cached reads each at its own rate.
    expected = (
        Decimal(1200 + 1500 + 1700) * Decimal("0.30")
        + Decimal(40 + 60 + 36) * Decimal("2.50")
        + Decimal(800) * Decimal("0.03")
    ) / Decimal(1_000_000)
    assert execution.cost_usd == expected.quantize(Decimal("0.000001")) > 0
    assert daily.cost_usd == execution.cost_usd
