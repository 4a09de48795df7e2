"""OpenTelemetry traces of a run: the span tree of its deliveries, model calls and tool calls in
one trace (the execution's id), across a resume after an approval; across the Celery hop to a
real worker process (its spans exported over OTLP/HTTP to a receiver in this test); log lines
that carry the execution and trace ids; and nothing at all when tracing is off."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agents.models import Agent, Execution, ExecutionStatus
from agents.runtime import loop
from agents.services import enqueue_execution, execution_create
from approvals import services as approval_services
from approvals.models import Approval
from approvals.services import approval_decide
from core import tenancy
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import by_turn, text_reply, tool_call_reply
from ops import tracing
from ops.log_context import RunContextFilter
from ops.tracing import propagation, state
from tests.processes import Worker, pending_execution, wait_for

APPROVE_EMAIL = {"type": "require_approval", "tools": ["email_*"], "description": "human"}
EMAIL = {"to": ["client@example.com"], "subject": "Renewal", "body": "Hello"}


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    tracing.configure(exporter=exporter)
    yield exporter
    tracing.disable()


def _email_agent(make_agent: Callable[..., Agent], server: FakeProviderServer) -> Agent:
    agent = make_agent("openai", allowed_tools=["email_*"], constraints=[APPROVE_EMAIL])
    server.set_responder(
        by_turn(
            tool_call_reply("email_send", EMAIL, input_tokens=40, output_tokens=12),
            text_reply("Sent.", input_tokens=60, output_tokens=3),
        ),
        key=agent.llm_model,
    )
    return agent


def _approve(execution: Execution) -> None:
    with tenancy.agency_context(execution.agency_id):
        approval = Approval.objects.get(execution=execution)
        approval_decide(approval=approval, approve=True, user_id=None, reason="fine")


def _by_name(finished: list[Any], prefix: str) -> list[Any]:
    return sorted((s for s in finished if s.name.startswith(prefix)), key=lambda s: s.start_time)


@pytest.mark.slow
def test_a_run_resumed_after_an_approval_is_one_trace_of_deliveries_model_and_tool_calls(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    spans: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    agent = _email_agent(make_agent, fake_llm_server)
    execution = pending_execution(agent, input_text="Write to the client.")
    sent: list[str] = []  # the resume's delivery, run here instead of by a worker
    monkeypatch.setattr(
        approval_services, "enqueue_execution", lambda e, **_: sent.append(str(e.id))
    )

    assert loop.run_execution(execution.id, agency_id=agent.agency_id) == "waiting_approval"
    _approve(execution)
    assert sent == [str(execution.id)]
    assert loop.run_execution(execution.id, agency_id=agent.agency_id) == "completed"

    finished = list(spans.get_finished_spans())
    deliveries = _by_name(finished, "invoke_agent")
    chats = _by_name(finished, "chat ")
    tools = _by_name(finished, "execute_tool")
    assert [len(deliveries), len(chats), len(tools)] == [2, 2, 2], [s.name for s in finished]
    first, resume = deliveries
    # One trace, the execution's id; the first delivery is its root, the resume under it.
    assert {s.context.trace_id for s in finished} == {execution.id.int}
    assert first.parent is None
    assert first.context.span_id == tracing.root_span_id_of(execution.id)
    assert resume.parent is not None
    assert resume.parent.span_id == first.context.span_id
    assert [link.context.span_id for link in resume.links] == [first.context.span_id]
    assert first.attributes["agentdesk.execution.id"] == str(execution.id)
    assert first.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert first.attributes["agentdesk.run.outcome"] == "waiting_approval"
    assert resume.attributes["agentdesk.run.outcome"] == "completed"
    assert resume.attributes["agentdesk.run.first_delivery"] is False

    # Each delivery's model call and tool call are its children.
    for delivery, chat, tool in zip(deliveries, chats, tools, strict=True):
        assert chat.parent.span_id == delivery.context.span_id
        assert tool.parent.span_id == delivery.context.span_id
    ask, answer = chats
    assert ask.name == f"chat {agent.llm_model}"
    assert ask.attributes["gen_ai.system"] == "openai"
    assert ask.attributes["gen_ai.request.model"] == agent.llm_model
    assert ask.attributes["gen_ai.usage.input_tokens"] == 40
    assert ask.attributes["gen_ai.usage.output_tokens"] == 12
    assert tuple(ask.attributes["gen_ai.response.finish_reasons"]) == ("tool_calls",)
    assert answer.attributes["gen_ai.usage.input_tokens"] == 60
    assert tuple(answer.attributes["gen_ai.response.finish_reasons"]) == ("end",)
    parked, ran = tools
    assert parked.name == ran.name == "execute_tool email_send"
    assert parked.attributes["agentdesk.tool.outcome"] == "waiting_approval"
    assert ran.attributes["agentdesk.tool.outcome"] == "completed"
    assert parked.attributes["gen_ai.tool.call.id"] == ran.attributes["gen_ai.tool.call.id"]


def test_a_failed_tool_call_and_a_failed_model_call_are_error_spans(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    spans: InMemorySpanExporter,
) -> None:
    from devkit.fake_server.script import HttpError

    agent = make_agent("openai")
    fake_llm_server.set_responder(
        by_turn(tool_call_reply("no_such_tool", {}), HttpError(status=400, message="bad")),
        key=agent.llm_model,
    )
    execution = pending_execution(agent, input_text="Try.")
    assert loop.run_execution(execution.id, agency_id=agent.agency_id) == "failed"
    finished = list(spans.get_finished_spans())
    (tool,) = _by_name(finished, "execute_tool")
    assert tool.attributes["error.type"] == "tool_not_allowed"
    assert tool.status.status_code.name == "ERROR"
    failed_chat = _by_name(finished, "chat ")[-1]
    assert failed_chat.status.status_code.name == "ERROR"
    assert failed_chat.attributes["error.type"] == "llm_bad_request"
    (delivery,) = _by_name(finished, "invoke_agent")
    assert delivery.status.status_code.name == "ERROR"


def test_log_lines_of_a_run_carry_its_execution_and_trace_ids(
    live_db: None, spans: InMemorySpanExporter
) -> None:
    from tests.agents.factories import AgentFactory, ExecutionFactory

    agent = AgentFactory.create()
    execution = ExecutionFactory.create(agent=agent, agency=agent.agency, site=agent.site)
    record = logging.LogRecord("agents.runtime.loop", logging.INFO, __file__, 1, "x", (), None)
    with tracing.delivery(execution, agent, first=True, started_ns=time.time_ns()):
        RunContextFilter().filter(record)
    assert record.execution_id == str(execution.id)  # type: ignore[attr-defined]
    assert record.trace_id == format(execution.id.int, "032x")  # type: ignore[attr-defined]
    assert record.run_context == (  # type: ignore[attr-defined]
        f" [execution={execution.id} trace={record.trace_id} span={record.span_id}]"  # type: ignore[attr-defined]
    )
    outside = logging.LogRecord("x", logging.INFO, __file__, 1, "x", (), None)
    RunContextFilter().filter(outside)
    assert outside.run_context == ""  # type: ignore[attr-defined]
    # The console handler of the settings' LOGGING puts it in every line.
    assert any(
        isinstance(f, RunContextFilter) for h in logging.getLogger().handlers for f in h.filters
    )


def test_tracing_off_opens_no_span_and_imports_no_sdk_on_the_hot_path(live_db: None) -> None:
    from tests.agents.factories import AgentFactory, ExecutionFactory

    assert not tracing.enabled()
    agent = AgentFactory.create()
    execution = ExecutionFactory.create(agent=agent, agency=agent.agency, site=agent.site)
    with tracing.delivery(execution, agent, first=True, started_ns=0) as span:
        assert span is None
        assert tracing.current_execution.get() == execution.id  # log lines still carry it
        with tracing.model_call(provider="openai", model="m", max_tokens=1, temperature=0) as chat:
            assert chat is None
        with tracing.tool_call(name="t", call_id="c") as tool:
            assert tool is None
    assert tracing.current_ids() is None
    assert state._state.provider is None


def test_a_message_carries_the_current_span_or_the_one_its_task_was_sent_from(
    spans: InMemorySpanExporter,
) -> None:
    from types import SimpleNamespace

    tracer = state._tracer()
    headers: dict[str, Any] = {}
    with tracer.start_as_current_span("sender") as sender:
        propagation._inject(headers=headers)
    context = sender.get_span_context()
    assert headers["traceparent"] == f"00-{context.trace_id:032x}-{context.span_id:016x}-01"

    # A task sent with it (the event's dispatch) and sending another, with no span of its own.
    task = SimpleNamespace(request=SimpleNamespace(traceparent=headers["traceparent"]))
    propagation._extract(task=task)
    onward: dict[str, Any] = {}
    propagation._inject(headers=onward)
    propagation._forget()
    assert onward == headers
    nothing: dict[str, Any] = {}
    propagation._inject(headers=nothing)
    assert nothing == {}
    for bad in ("", "00-zz-11-01", f"00-{'0' * 32}-{'1' * 16}-01", "garbage"):
        assert propagation._parse_traceparent(bad) is None


# --- across the Celery hop: a real worker exporting over OTLP/HTTP --------------------------------
@dataclass
class Receiver:
    """An OTLP/HTTP trace receiver on loopback: what the worker's exporter sends, decoded."""

    spans: list[Any] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                with receiver.lock:
                    for resource in request.resource_spans:
                        for scope in resource.scope_spans:
                            receiver.spans.extend(scope.spans)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        return Handler


def _attributes(span: Any) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for kv in span.attributes:
        kind = kv.value.WhichOneof("value")
        values[kv.key] = getattr(kv.value, kind) if kind else None
    return values


@pytest.fixture
def otlp_receiver() -> Iterator[tuple[Receiver, str]]:
    receiver = Receiver()
    server = ThreadingHTTPServer(("127.0.0.1", 0), receiver.handler())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield receiver, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.mark.slow
def test_spans_cross_the_celery_hop_to_a_worker_and_a_resume_after_an_approval(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    spans: InMemorySpanExporter,
    otlp_receiver: tuple[Receiver, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    receiver, endpoint = otlp_receiver
    queue = f"tracing-{uuid.uuid4().hex[:8]}"
    # The approval's resume goes to this test's worker too (its own queue).
    monkeypatch.setattr(
        approval_services, "enqueue_execution", partial(enqueue_execution, queue=queue)
    )
    worker = Worker(
        queue=queue, AGENTDESK_OTLP_ENDPOINT=endpoint, OTEL_BSP_SCHEDULE_DELAY="50"
    ).start()
    tracer = state._tracer()
    try:
        agent = _email_agent(make_agent, fake_llm_server)
        with tracer.start_as_current_span("POST /api/v1/agents/{id}/execute") as request_span:
            with tenancy.agency_context(agent.agency_id):
                execution = execution_create(agent=agent, input="Write.", queue=queue)
            assert execution is not None
        assert wait_for(execution, {"waiting_approval"}).status == "waiting_approval"
        with tracer.start_as_current_span("POST /api/v1/approvals/{id}/decide") as decide_span:
            _approve(execution)
        assert wait_for(execution).status == ExecutionStatus.COMPLETED
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            with receiver.lock:
                if sum(s.name.startswith("invoke_agent") for s in receiver.spans) >= 2:
                    break
            time.sleep(0.1)
    finally:
        worker.stop()

    with receiver.lock:
        received = list(receiver.spans)
    deliveries = sorted(
        (s for s in received if s.name.startswith("invoke_agent")),
        key=lambda s: s.start_time_unix_nano,
    )
    assert len(deliveries) == 2, [s.name for s in received]
    first, resume = deliveries
    trace_id = execution.id.int.to_bytes(16, "big")
    assert {s.trace_id for s in received} == {trace_id}
    assert first.parent_span_id == b""
    assert resume.parent_span_id == first.span_id
    # Each delivery links to the span that sent its Celery message (the request, the decision).
    request_context = request_span.get_span_context()
    decide_context = decide_span.get_span_context()
    assert [(link.trace_id, link.span_id) for link in first.links] == [
        (
            request_context.trace_id.to_bytes(16, "big"),
            request_context.span_id.to_bytes(8, "big"),
        )
    ]
    assert (
        decide_context.trace_id.to_bytes(16, "big"),
        decide_context.span_id.to_bytes(8, "big"),
    ) in [(link.trace_id, link.span_id) for link in resume.links]
    assert _attributes(first)["agentdesk.run.outcome"] == "waiting_approval"
    assert _attributes(resume)["agentdesk.run.outcome"] == "completed"
    children = {
        delivery.span_id: sorted(
            s.name.split(" ")[0] for s in received if s.parent_span_id == delivery.span_id
        )
        for delivery in deliveries
    }
    assert children == {
        first.span_id: ["chat", "execute_tool", "invoke_agent"],  # the resume under the first
        resume.span_id: ["chat", "execute_tool"],
    }
