"""The runtime end to end: a real Celery worker process, real PostgreSQL and Redis, and the real
OpenAI / Anthropic SDK clients talking to the fake provider server, for both wire formats."""

from __future__ import annotations

import datetime
import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from agents.models import Agent, Execution, ExecutionStatus, StepType, StopReason
from agents.services import execution_cancel, execution_create
from agents.tasks import reap_expired_leases
from core import tenancy
from core.models import Event
from crm.models import Contact, Note
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import (
    RawReply,
    Reply,
    ScriptedToolCall,
    by_turn,
    hang,
    malformed_tool_call_reply,
    text_reply,
    tool_call_reply,
)
from tests.api.conftest import key_client
from tests.processes import Worker, wait_for
from tools.models import Tool, ToolCall

pytestmark = pytest.mark.slow
KINDS = ["openai", "anthropic", "google"]
# The wires whose tool arguments are JSON text, so a model can send text that is not JSON. Gemini's
# are an object: the API answers a call it could not form with MALFORMED_FUNCTION_CALL instead
# (retried by the gateway: tests/agents/llm/test_google_provider.py).
TEXT_ARGUMENT_KINDS = ["openai", "anthropic"]


def _start(agent: Agent, text: str = "Handle it.") -> Execution:
    with tenancy.agency_context(agent.agency_id):
        execution = execution_create(agent=agent, input=text)
    assert execution is not None
    return execution


def _contact(agent: Agent, **fields: Any) -> Contact:
    with tenancy.agency_context(agent.agency_id):
        return Contact.objects.create(
            agency_id=agent.agency_id,
            first_name=fields.get("first_name", "Ada"),
            last_name="Lovelace",
            email=fields.get("email", "ada@example.com"),
        )


def _steps(execution: Execution) -> list[tuple[str, str]]:
    with tenancy.agency_context(execution.agency_id):
        return list(execution.steps.order_by("step_number").values_list("step_type", "tool_name"))


def _tool_results(server: FakeProviderServer, model: str) -> list[str]:
    """What the model was told about its tool calls, request by request."""
    return [json.dumps(r.tool_results) for r in server.requests_for(model)]


@pytest.mark.parametrize("kind", KINDS)
def test_run_looks_up_a_contact_adds_a_note_and_finishes(
    kind: str,
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = make_agent(kind, allowed_tools=["crm_*"])
    contact = _contact(agent)
    fake_llm_server.set_responder(
        by_turn(
            tool_call_reply("crm_get_contact", {"email": "ada@example.com"}),
            tool_call_reply(
                "crm_add_note", {"contact_id": str(contact.id), "content": "Called about pricing."}
            ),
            text_reply("Noted the call on Ada's record."),
        ),
        key=agent.llm_model,
    )
    execution = wait_for(_start(agent, "Log that Ada called about pricing."))

    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    assert execution.stop_reason == StopReason.FINAL_ANSWER
    assert execution.output == "Noted the call on Ada's record."
    assert _steps(execution) == [
        (StepType.OBSERVE, ""),
        (StepType.THINK, ""),
        (StepType.ACT, "crm_get_contact"),
        (StepType.THINK, ""),
        (StepType.ACT, "crm_add_note"),
        (StepType.THINK, ""),
    ]
    with tenancy.agency_context(agent.agency_id):
        notes = list(Note.objects.filter(contact=contact).values_list("content", flat=True))
        calls = list(ToolCall.objects.filter(execution=execution).values_list("status", flat=True))
        transitions = list(
            execution.state_transitions.order_by("sequence").values_list("to_state", flat=True)
        )
        events = set(
            Event.objects.filter(source_entity_id=str(execution.id)).values_list(
                "event_type", flat=True
            )
        )
        agent.refresh_from_db()
    assert notes == ["Called about pricing."]
    assert calls == ["completed", "completed"]
    assert transitions == ["pending", "running", "completed"]
    assert {"ai.execution.started", "ai.execution.completed"} <= events
    with tenancy.agency_context(agent.agency_id):
        done = Event.objects.get(
            source_entity_id=str(execution.id), event_type="ai.execution.completed"
        )
    assert done.payload["actions_taken"] == 2  # seed 004's payload
    assert done.payload["tokens_used"] == execution.tokens_total
    assert (agent.total_runs, agent.successful_runs, agent.total_actions_taken) == (1, 1, 2)
    assert execution.tokens_total > 0
    requests = fake_llm_server.requests_for(agent.llm_model)
    assert len(requests) == 3
    assert "crm_get_contact" in requests[0].tool_names
    assert "Ada" in _tool_results(fake_llm_server, agent.llm_model)[1]
    assert requests[0].system is not None
    assert "You help the agency" in requests[0].system


@pytest.mark.parametrize("kind", TEXT_ARGUMENT_KINDS)
def test_bad_tool_arguments_return_an_error_the_model_recovers_from(
    kind: str,
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = make_agent(kind)
    contact = _contact(agent)
    fake_llm_server.set_responder(
        by_turn(
            malformed_tool_call_reply("crm_add_note"),  # arguments that are not JSON
            tool_call_reply("crm_add_note", {"content": 42}),  # no contact, wrong type
            tool_call_reply("crm_add_note", {"contact_id": str(contact.id), "content": "ok"}),
            text_reply("Fixed it."),
        ),
        key=agent.llm_model,
    )
    execution = wait_for(_start(agent))
    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    told = _tool_results(fake_llm_server, agent.llm_model)
    assert "not valid JSON" in told[1]
    assert "invalid_arguments" in told[2]
    with tenancy.agency_context(agent.agency_id):
        statuses = list(
            ToolCall.objects.filter(execution=execution).order_by("created_at")
            .values_list("status", "error_code")
        )  # fmt: skip
        assert Note.objects.filter(contact=contact).count() == 1
    assert statuses == [
        ("failed", "invalid_arguments"),
        ("failed", "invalid_arguments"),
        ("completed", ""),
    ]


def _unstorable_turns(contact: Contact, scenario: str) -> tuple[list[Any], list[str]]:
    """Replies carrying what jsonb and text refuse, and what the model must be told of each."""
    if scenario == "nan and nul":  # NaN: Python's JSON reader takes it, JSON has no such value
        nan = f'{{"contact_id": "{contact.id}", "content": NaN}}'
        return [
            Reply(tool_calls=(ScriptedToolCall("crm_add_note", nan),)),
            tool_call_reply("crm_add_note", {"contact_id": str(contact.id), "content": "a\x00b"}),
            text_reply("Done\x00."),
        ], ["NaN", "NUL"]
    surrogate = f'{{"contact_id": "{contact.id}", "content": "a\\ud800b"}}'  # JSON's escape
    return [
        # A literal NUL inside the JSON text: not JSON, and the raw text is kept.
        Reply(tool_calls=(ScriptedToolCall("crm_add_note", '{"content": "a\x00b"}'),)),
        Reply(tool_calls=(ScriptedToolCall("crm_add_note", surrogate),)),
        text_reply("Done\ud800."),
    ], ["not valid JSON", "surrogates"]


@pytest.mark.parametrize(
    ("kind", "scenario"),
    [
        *[(kind, "nan and nul") for kind in KINDS],
        # Raw NUL in the arguments' text: a text-argument wire's case only.
        *[(kind, "raw nul and lone surrogates") for kind in TEXT_ARGUMENT_KINDS],
    ],
)
def test_what_postgresql_cannot_store_does_not_end_the_run(
    kind: str,
    scenario: str,
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    # Arguments carrying it are an error the model sees and can correct; a reply's text keeps
    # U+FFFD in its place.
    agent = make_agent(kind)
    contact = _contact(agent)
    turns, errors = _unstorable_turns(contact, scenario)
    fake_llm_server.set_responder(by_turn(*turns), key=agent.llm_model)
    execution = wait_for(_start(agent))
    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    assert execution.output == "Done\ufffd."
    told = _tool_results(fake_llm_server, agent.llm_model)
    assert [error in told[n] for n, error in enumerate(errors, start=1)] == [True, True]
    with tenancy.agency_context(agent.agency_id):
        assert not Note.objects.filter(contact=contact).exists()
        codes = list(ToolCall.objects.filter(execution=execution).values_list("error_code"))
    assert codes == [("invalid_arguments",), ("invalid_arguments",)]


def test_a_step_that_cannot_be_written_ends_the_run_failed_not_stuck(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    # A broken server's token count overflows the step's column: the final answer's write
    # fails after it had marked the run completed in memory. The run must end from what was
    # committed (failed, with the error), not hang as "running" until its lease runs out.
    agent = make_agent("openai")
    fake_llm_server.set_responder(
        by_turn(text_reply("Done.", input_tokens=2**40)), key=agent.llm_model
    )
    execution = wait_for(_start(agent))
    assert execution.status == ExecutionStatus.FAILED
    assert execution.error.startswith("Internal error: DataError")
    assert len(fake_llm_server.requests_for(agent.llm_model)) == 1  # not asked again


def test_a_model_name_longer_than_the_step_column_is_cut(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    # llama.cpp's server, for one, names the model by its file path.
    agent = make_agent("openai")
    name = "/models/" + "x" * 200 + ".gguf"
    fake_llm_server.set_responder(
        by_turn(
            RawReply(
                {
                    "id": "chatcmpl-1",
                    "object": "chat.completion",
                    "created": 0,
                    "model": name,
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "stop",
                            "message": {"role": "assistant", "content": "Done."},
                        }
                    ],
                    "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
                }
            )
        ),
        key=agent.llm_model,
    )
    execution = wait_for(_start(agent))
    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    with tenancy.agency_context(agent.agency_id):
        models = list(execution.steps.filter(step_type=StepType.THINK).values_list("model"))
    assert models == [(name[:100],)]


@pytest.mark.parametrize("kind", KINDS)
def test_a_final_answer_cut_off_by_max_tokens_is_not_passed_off_as_complete(
    kind: str,
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = make_agent(kind, max_tokens=50)
    fake_llm_server.set_responder(
        by_turn(Reply(text="The three options are: first,", stop="max_tokens")),
        key=agent.llm_model,
    )
    execution = wait_for(_start(agent))
    assert execution.status == ExecutionStatus.FAILED
    assert execution.stop_reason == StopReason.ERROR
    assert execution.output == "The three options are: first,"
    assert "cut off by the max_tokens limit (50)" in execution.error


@pytest.mark.parametrize("kind", KINDS)
def test_run_stops_at_max_steps(
    kind: str,
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = make_agent(kind, max_steps_per_run=2)
    fake_llm_server.set_responder(
        by_turn(then=tool_call_reply("crm_search_contacts", {"query": "x"})),
        key=agent.llm_model,
    )
    execution = wait_for(_start(agent))
    assert execution.status == ExecutionStatus.FAILED
    assert execution.stop_reason == StopReason.MAX_STEPS
    assert execution.llm_call_count == 2
    assert len(fake_llm_server.requests_for(agent.llm_model)) == 2


@pytest.mark.parametrize("kind", KINDS)
def test_run_times_out_on_wall_clock(
    kind: str,
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = make_agent(kind, timeout_seconds=1)
    slow_search = Reply(
        tool_calls=tool_call_reply("crm_search_contacts", {"query": "x"}).tool_calls, latency=0.6
    )
    fake_llm_server.set_responder(by_turn(then=slow_search), key=agent.llm_model)
    execution = wait_for(_start(agent))
    assert execution.status == ExecutionStatus.TIMED_OUT
    assert execution.stop_reason == StopReason.TIMEOUT
    assert execution.llm_call_count <= 2


@pytest.mark.parametrize("kind", KINDS)
def test_a_hung_model_call_ends_the_run_at_its_timeout(
    kind: str,
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    """The run's time limit holds during the call: not the provider timeout x attempts."""
    agent = make_agent(kind, timeout_seconds=1)
    fake_llm_server.set_responder(by_turn(then=hang(seconds=30)), key=agent.llm_model)
    execution = wait_for(_start(agent))
    assert execution.status == ExecutionStatus.TIMED_OUT, execution.error
    assert execution.stop_reason == StopReason.TIMEOUT
    assert "during a model call" in execution.error


@pytest.mark.parametrize("kind", KINDS)
def test_cancel_takes_effect_before_the_next_model_call(
    kind: str,
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = make_agent(kind)
    slow = Reply(  # long enough for the cancel to land while the model is still answering
        tool_calls=tool_call_reply("crm_search_contacts", {"query": "x"}).tool_calls, latency=2.0
    )
    fake_llm_server.set_responder(by_turn(then=slow), key=agent.llm_model)
    execution = _start(agent)
    deadline = time.monotonic() + 20
    while not fake_llm_server.requests_for(agent.llm_model) and time.monotonic() < deadline:
        time.sleep(0.02)
    response = key_client(agent.agency).post(f"/api/v1/executions/{execution.id}/cancel/")
    assert response.status_code == 200
    assert response.json()["status"] == ExecutionStatus.RUNNING  # the worker stops it
    execution = wait_for(execution)
    assert execution.status == ExecutionStatus.CANCELLED
    assert execution.stop_reason == StopReason.CANCELLED
    # The reply in flight when the cancel came is recorded; its tool call does not run and no
    # further model call is made.
    assert len(fake_llm_server.requests_for(agent.llm_model)) == 1
    assert execution.llm_call_count == 1
    with tenancy.agency_context(agent.agency_id):
        assert not ToolCall.objects.filter(execution=execution).exists()
        ended = Event.objects.get(
            source_entity_id=str(execution.id), event_type__startswith="ai.execution.f"
        )
    # A run that did not complete ends with "failed"; its payload says how.
    assert ended.event_type == "ai.execution.failed"
    assert ended.payload["status"] == ExecutionStatus.CANCELLED


def _blocked_tool_waiters() -> int:
    """Sessions waiting for a lock this test's session holds (the run's tool, on the contact
    row), whatever else the server is doing."""
    with connection.cursor() as cursor:
        cursor.execute(  # (pg_locks: pg_stat_activity is read once per transaction)
            "SELECT count(*) FROM pg_locks"
            " WHERE NOT granted AND pg_backend_pid() = ANY(pg_blocking_pids(pid))"
        )
        return int(cursor.fetchone()[0])


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("meanwhile", ["cancel", "takeover"])
def test_what_happens_while_the_replys_last_tool_runs_is_seen_before_the_next_model_call(
    meanwhile: str,
    kind: str,
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    """The last tool result's COMMIT is still in flight while the next model request is built;
    the request must not go out before it is confirmed. A cancel that came during the tool
    ends the run there; a run taken over by another delivery (the reaper's release of an
    expired lease) gets no model call from the worker that lost it.

    On a worker configured as in production: with the test workers' catalogue cache off, the
    budget check before each model call reads the database, which collects the commit before
    the request is built."""
    agent = make_agent(kind, allowed_tools=["crm_*"])
    contact = _contact(agent)
    update = tool_call_reply(
        "crm_update_contact", {"contact_id": str(contact.id), "updates": {"first_name": "Augusta"}}
    )
    # The first reply takes a second: time to take the contact's row lock before the tool runs.
    first = Reply(tool_calls=update.tool_calls, latency=1.0)
    fake_llm_server.set_responder(by_turn(first, text_reply("Done.")), key=agent.llm_model)
    queue = f"in-flight-{uuid.uuid4().hex[:8]}"
    production = Worker(queue=queue, AGENTDESK_CATALOGUE_CACHE_SECONDS="30").start()
    try:
        with tenancy.agency_context(agent.agency_id):
            execution = execution_create(agent=agent, input="Rename her.", queue=queue)
        assert execution is not None
        with tenancy.agency_context(agent.agency_id):
            Contact.objects.select_for_update().get(pk=contact.pk)
            deadline = time.monotonic() + 20
            while not _blocked_tool_waiters():  # the tool waits for the row
                assert time.monotonic() < deadline, "the tool never ran"
                time.sleep(0.02)
            if meanwhile == "cancel":
                execution_cancel(execution=execution)
            else:  # what the reaper does to a run whose lease ran out
                Execution.objects.filter(pk=execution.pk).update(
                    lease_owner="", lease_expires_at=timezone.now() - datetime.timedelta(seconds=1)
                )
        # Committed: the lock is released, the tool finishes and its step is written.
        _check_what_followed(meanwhile, execution, agent, contact, fake_llm_server)
    finally:
        production.stop()


def _check_what_followed(
    meanwhile: str,
    execution: Execution,
    agent: Agent,
    contact: Contact,
    fake_llm_server: FakeProviderServer,
) -> None:
    if meanwhile == "cancel":
        execution = wait_for(execution)
        assert execution.status == ExecutionStatus.CANCELLED
        # The tool's result was committed with its change; no model call came after it.
        assert _steps(execution)[-1] == (StepType.ACT, "crm_update_contact")
        assert len(fake_llm_server.requests_for(agent.llm_model)) == 1
        assert execution.llm_call_count == 1
    else:
        # The worker that lost the run wrote nothing (its step failed at the lease fence);
        # the reaper's new delivery runs the tool again and finishes.
        assert reap_expired_leases() >= 1
        execution = wait_for(execution)
        assert execution.status == ExecutionStatus.COMPLETED, execution.error
        # One model call per persisted reply: the worker that lost the lease made none.
        assert len(fake_llm_server.requests_for(agent.llm_model)) == 2
        assert execution.attempts == 2
    with tenancy.agency_context(agent.agency_id):
        assert Contact.objects.get(pk=contact.pk).first_name == "Augusta"
        calls = list(ToolCall.objects.filter(execution=execution).values_list("status", flat=True))
    assert calls == ["completed"]  # applied once


def test_cancel_of_a_pending_run_is_immediate(
    make_agent: Callable[..., Agent], live_db: None
) -> None:
    agent = make_agent("openai")
    with tenancy.agency_context(agent.agency_id):
        execution = Execution.objects.create(
            agency_id=agent.agency_id, agent=agent, site_id=agent.site_id, trigger_type="manual"
        )
        cancelled = execution_cancel(execution=execution)
    assert cancelled.status == ExecutionStatus.CANCELLED


@pytest.mark.parametrize("kind", KINDS)
def test_denied_tool_pattern_is_refused_and_the_model_told(
    kind: str,
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = make_agent(kind, allowed_tools=["crm_*"], denied_tools=["crm_add_*"])
    contact = _contact(agent)
    fake_llm_server.set_responder(
        by_turn(
            tool_call_reply("crm_add_note", {"contact_id": str(contact.id), "content": "x"}),
            text_reply("I may not add notes."),
        ),
        key=agent.llm_model,
    )
    execution = wait_for(_start(agent))
    assert execution.status == ExecutionStatus.COMPLETED
    first = fake_llm_server.requests_for(agent.llm_model)[0]
    assert "crm_add_note" not in first.tool_names
    assert "crm_get_contact" in first.tool_names
    assert "tool_not_allowed" in _tool_results(fake_llm_server, agent.llm_model)[1]
    with tenancy.agency_context(agent.agency_id):
        assert not Note.objects.filter(contact=contact).exists()


@pytest.mark.parametrize("kind", KINDS)
def test_tool_rate_limit_per_agent_is_enforced(
    kind: str,
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = make_agent(kind)
    search = tool_call_reply("crm_search_contacts", {"query": "ada"})
    fake_llm_server.set_responder(
        by_turn(search, search, search, text_reply("done")), key=agent.llm_model
    )
    with tenancy.platform_context():
        tool = Tool.objects.get(name="crm_search_contacts")
        previous = tool.rate_limit_per_minute
        tool.rate_limit_per_minute = 2
        tool.save(update_fields=["rate_limit_per_minute"])
    # The limit counts fixed minutes (tools/ratelimit.py): three calls across a minute's end
    # would be two windows, each under the limit. Started early in a minute, they share one.
    if (into_minute := time.time() % 60) > 30:
        time.sleep(60 - into_minute)
    try:
        execution = wait_for(_start(agent))
    finally:
        with tenancy.platform_context():
            Tool.objects.filter(pk=tool.pk).update(rate_limit_per_minute=previous)
    assert execution.status == ExecutionStatus.COMPLETED
    with tenancy.agency_context(agent.agency_id):
        codes = list(
            ToolCall.objects.filter(execution=execution).order_by("created_at")
            .values_list("error_code", flat=True)
        )  # fmt: skip
    assert codes == ["", "", "rate_limited"]
