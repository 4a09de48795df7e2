"""OpenTelemetry traces of runs (README "Operations: metrics and traces").

Off unless an OTLP endpoint is configured (``AGENTDESK_OTLP_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_ENDPOINT``): then every call below returns at once and the SDK is never
imported. On, each process sets up its exporter the first time it opens a span (a forked pool
process sets up its own).

One trace per run, whatever the number of deliveries and processes: its trace id is the
execution's id (128 bits), so a run's trace is found from its id, and every delivery finds its
trace without anything stored. The first delivery's span is the trace's root (its span id derived
from the execution id too); a later delivery — the resume after an approval or an answer, a wake
after a timer, a re-delivery after a lost worker — is a new span under it (and linked to it).
Spans:

- ``invoke_agent <agent>`` per delivery (GenAI semantic conventions' agent span), from the claim
  to the run's end or park, with ``agentdesk.execution.id``, the delivery and its outcome;
- ``chat <model>`` per model call (``gen_ai.system``, ``gen_ai.request.model``,
  ``gen_ai.usage.input_tokens`` / ``output_tokens``, ``gen_ai.response.finish_reasons``...);
- ``execute_tool <tool>`` per tool call (``gen_ai.tool.name``, ``gen_ai.tool.call.id``, the
  outcome, ``error.type`` when it failed).

Across the Celery hop, the span current where a task is sent (a run's tool emitting an event
that starts another agent, a person's decision in a traced request) travels in the message's
``traceparent`` header, and on through tasks that send others (the event's dispatch); the
delivery it starts links to it.
"""

from __future__ import annotations

import contextvars
import logging
import os
import threading
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any

from celery.signals import before_task_publish, task_postrun, task_prerun, worker_process_shutdown
from django.conf import settings

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Span, SpanContext, Tracer

    from agents.llm import Completion
    from agents.models import Agent, Execution

logger = logging.getLogger(__name__)

TRACEPARENT = "traceparent"
# The execution a thread is working on (log lines carry it, traced or not: ops.log_context).
current_execution: contextvars.ContextVar[uuid.UUID | None] = contextvars.ContextVar(
    "agentdesk_execution", default=None
)
# The span context a Celery message carried (set for the task's duration).
_incoming: contextvars.ContextVar[SpanContext | None] = contextvars.ContextVar(
    "agentdesk_incoming_trace", default=None
)
# Ids the next span started must have (the first delivery's root: see _RunIds).
_forced_ids: contextvars.ContextVar[tuple[int, int] | None] = contextvars.ContextVar(
    "agentdesk_forced_ids", default=None
)


class _State:
    enabled: bool = bool(settings.AGENTDESK_TRACING)
    pid: int = 0
    provider: TracerProvider | None = None
    tracer: Tracer | None = None
    exporter: SpanExporter | None = None  # set by tests: spans go there, one by one


_state = _State()
_lock = threading.Lock()
# What a span's block gets when tracing is off (no generator, no allocation per call).
_OFF: AbstractContextManager[None] = nullcontext()


def enabled() -> bool:
    return _state.enabled


def configure(*, exporter: SpanExporter | None = None) -> None:
    """Turn tracing on in this process: to ``exporter`` span by span (tests: an in-memory
    exporter), else over OTLP/HTTP in batches (settings)."""
    with _lock:
        _state.enabled = True
        _state.exporter = exporter
        _state.pid = 0  # set up again at the next span
        if _state.provider is not None:
            _state.provider.shutdown()
        _state.provider = _state.tracer = None


def disable() -> None:
    with _lock:
        if _state.provider is not None:
            _state.provider.shutdown()
        _state.enabled = False
        _state.provider = _state.tracer = _state.exporter = None


def _tracer() -> Tracer:
    if _state.tracer is not None and _state.pid == os.getpid():
        return _state.tracer
    with _lock:
        if _state.tracer is None or _state.pid != os.getpid():
            _set_up()
        assert _state.tracer is not None
        return _state.tracer


def _set_up() -> None:
    from opentelemetry.sdk.resources import Resource  # noqa: PLC0415 - only when tracing is on
    from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415
    from opentelemetry.sdk.trace.export import (  # noqa: PLC0415
        BatchSpanProcessor,
        SimpleSpanProcessor,
    )

    provider = TracerProvider(
        resource=Resource.create({"service.name": settings.OTEL_SERVICE_NAME}),
        id_generator=_run_id_generator(),
    )
    if _state.exporter is not None:
        provider.add_span_processor(SimpleSpanProcessor(_state.exporter))
    else:
        provider.add_span_processor(BatchSpanProcessor(_otlp_exporter()))
    _state.provider = provider
    _state.tracer = provider.get_tracer("agentdesk")
    _state.pid = os.getpid()


def _otlp_exporter() -> SpanExporter:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # noqa: PLC0415
        OTLPSpanExporter,
    )

    endpoint = str(settings.AGENTDESK_OTLP_ENDPOINT).rstrip("/")
    if os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        return OTLPSpanExporter()  # the SDK's own, most specific variable wins
    # A base URL, as OTEL_EXPORTER_OTLP_ENDPOINT is: the traces path is added.
    if not endpoint.endswith("/v1/traces"):
        endpoint += "/v1/traces"
    return OTLPSpanExporter(endpoint=endpoint)


def _run_id_generator() -> Any:
    from opentelemetry.sdk.trace.id_generator import RandomIdGenerator  # noqa: PLC0415

    class RunIds(RandomIdGenerator):
        """Random ids, except for the span a delivery starts with ids of its run."""

        def generate_trace_id(self) -> int:
            forced = _forced_ids.get()
            return forced[0] if forced else super().generate_trace_id()

        def generate_span_id(self) -> int:
            forced = _forced_ids.get()
            return forced[1] if forced else super().generate_span_id()

    return RunIds()


def trace_id_of(execution_id: uuid.UUID) -> int:
    return execution_id.int


def root_span_id_of(execution_id: uuid.UUID) -> int:
    """The first delivery's span id: the execution id's low 64 bits (never 0)."""
    return (execution_id.int & 0xFFFF_FFFF_FFFF_FFFF) or 1


# --- spans ----------------------------------------------------------------------------------------
@contextmanager
def delivery(
    execution: Execution, agent: Agent, *, first: bool, started_ns: int
) -> Iterator[Span | None]:
    """One delivery of a run: from its claim (``started_ns``, time.time_ns()) to the end of the
    block. Sets the execution for log lines, traced or not."""
    token = current_execution.set(execution.id)
    try:
        if not _state.enabled:
            yield None
            return
        with _delivery_span(execution, agent, first=first, started_ns=started_ns) as span:
            yield span
    finally:
        current_execution.reset(token)


@contextmanager
def _delivery_span(
    execution: Execution, agent: Agent, *, first: bool, started_ns: int
) -> Iterator[Span]:
    from opentelemetry import trace  # noqa: PLC0415
    from opentelemetry.trace import Link, SpanKind  # noqa: PLC0415

    tracer = _tracer()
    trace_id, root_id = trace_id_of(execution.id), root_span_id_of(execution.id)
    links = []
    incoming = _incoming.get()
    if incoming is not None:
        links.append(Link(incoming, {"agentdesk.link": "sent_by"}))
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.id": str(agent.id),
        "gen_ai.agent.name": agent.name,
        "agentdesk.execution.id": str(execution.id),
        "agentdesk.agency.id": str(execution.agency_id),
        "agentdesk.agent.type": agent.agent_type,
        "agentdesk.trigger.type": execution.trigger_type,
        "agentdesk.run.first_delivery": first,
        "agentdesk.run.attempts": execution.attempts,
    }
    name = f"invoke_agent {agent.name}"
    if first:
        forced = _forced_ids.set((trace_id, root_id))
        try:
            span = tracer.start_span(
                name,
                context=trace.set_span_in_context(trace.INVALID_SPAN),  # a root
                kind=SpanKind.CONSUMER,
                attributes=attributes,
                links=links,
                start_time=started_ns,
            )
        finally:
            _forced_ids.reset(forced)
    else:
        first_delivery = _remote(trace_id, root_id, name)
        links.append(Link(first_delivery, {"agentdesk.link": "first_delivery"}))
        span = tracer.start_span(
            name,
            context=trace.set_span_in_context(trace.NonRecordingSpan(first_delivery)),
            kind=SpanKind.CONSUMER,
            attributes=attributes,
            links=links,
            start_time=started_ns,
        )
    with trace.use_span(span, end_on_exit=True):
        yield span


def _remote(trace_id: int, span_id: int, name: str) -> SpanContext:
    """The first delivery's span context, sampled as the sampler decided for it (by trace id,
    as a root: the same decision again)."""
    from opentelemetry.trace import SpanContext, TraceFlags  # noqa: PLC0415

    provider = _state.provider
    sampled = True
    if provider is not None:
        decision = provider.sampler.should_sample(None, trace_id, name)
        sampled = decision.decision.is_sampled()
    flags = TraceFlags(TraceFlags.SAMPLED if sampled else TraceFlags.DEFAULT)
    return SpanContext(trace_id, span_id, is_remote=True, trace_flags=flags)


def delivery_ended(span: Span | None, outcome: str) -> None:
    """The delivery's outcome: the run's final or waiting status (``completed``,
    ``waiting_approval``...), or why it stopped here (``lease_lost``, ``not_claimed``)."""
    if span is None:
        return
    from opentelemetry.trace import Status, StatusCode  # noqa: PLC0415

    span.set_attribute("agentdesk.run.outcome", outcome)
    if outcome in ("failed", "timed_out"):
        span.set_status(Status(StatusCode.ERROR, outcome))


def model_call(
    *, provider: str, model: str, max_tokens: int, temperature: float
) -> AbstractContextManager[Span | None]:
    """A model call (``chat`` in the GenAI conventions); an exception out of the block marks it
    failed, with the gateway's error code as ``error.type``."""
    if not _state.enabled:
        return _OFF
    return _model_call(provider, model, max_tokens, temperature)


@contextmanager
def _model_call(provider: str, model: str, max_tokens: int, temperature: float) -> Iterator[Span]:
    from opentelemetry.trace import SpanKind  # noqa: PLC0415

    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.system": provider,
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": model,
        "gen_ai.request.max_tokens": max_tokens,
        "gen_ai.request.temperature": temperature,
    }
    with _span(f"chat {model}", SpanKind.CLIENT, attributes) as span:
        yield span


def model_replied(span: Span | None, completion: Completion) -> None:
    if span is None:
        return
    usage = completion.usage
    span.set_attributes(
        {
            "gen_ai.response.model": completion.model,
            "gen_ai.response.finish_reasons": [str(completion.stop_reason)],
            # The conventions' input tokens include cached ones; ours are split (Usage).
            "gen_ai.usage.input_tokens": usage.total_input_tokens,
            "gen_ai.usage.output_tokens": usage.output_tokens,
            "gen_ai.usage.cache_read.input_tokens": usage.cache_read_tokens,
            "gen_ai.usage.cache_creation.input_tokens": usage.cache_write_tokens,
            "agentdesk.model_call.attempts": completion.attempts,
            "agentdesk.model_call.tool_calls": len(completion.tool_calls),
        }
    )


def tool_call(*, name: str, call_id: str) -> AbstractContextManager[Span | None]:
    if not _state.enabled:
        return _OFF
    return _tool_call(name, call_id)


@contextmanager
def _tool_call(name: str, call_id: str) -> Iterator[Span]:
    from opentelemetry.trace import SpanKind  # noqa: PLC0415

    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.type": "function",
    }
    with _span(f"execute_tool {name}", SpanKind.INTERNAL, attributes) as span:
        yield span


def tool_settled(span: Span | None, *, status: str, output: dict[str, Any]) -> None:
    """The call's outcome (``completed``, ``failed``, ``denied``, ``waiting_approval``...)."""
    if span is None:
        return
    from opentelemetry.trace import Status, StatusCode  # noqa: PLC0415

    span.set_attribute("agentdesk.tool.outcome", status)
    error = output.get("error") if isinstance(output, dict) else None
    if isinstance(error, dict):
        code = str(error.get("code") or "error")
        span.set_attribute("error.type", code)
        span.set_status(Status(StatusCode.ERROR, str(error.get("message", ""))[:200]))


@contextmanager
def _span(name: str, kind: Any, attributes: dict[str, Any]) -> Iterator[Span]:
    from opentelemetry import trace  # noqa: PLC0415
    from opentelemetry.trace import Status, StatusCode  # noqa: PLC0415

    span = _tracer().start_span(name, kind=kind, attributes=attributes)
    with trace.use_span(span, end_on_exit=True, record_exception=False):
        try:
            yield span
        except BaseException as exc:
            span.set_attribute("error.type", str(getattr(exc, "code", "") or type(exc).__name__))
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, str(exc)[:200]))
            raise


def current_ids() -> tuple[str, str] | None:
    """(trace id, span id) in hex of the span current in this thread, when tracing is on."""
    if not _state.enabled:
        return None
    from opentelemetry import trace  # noqa: PLC0415

    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return format(context.trace_id, "032x"), format(context.span_id, "016x")


# --- the Celery hop ---------------------------------------------------------------------------
@before_task_publish.connect(weak=False)
def _inject(headers: dict[str, Any] | None = None, **_: Any) -> None:
    if not _state.enabled or headers is None:
        return
    ids = current_ids()
    if ids is not None:
        headers[TRACEPARENT] = f"00-{ids[0]}-{ids[1]}-01"
        return
    # No span here, but this task was sent from one (a run's event, dispatched by a task of
    # its own, starting another agent): the message it sends carries that on.
    incoming = _incoming.get()
    if incoming is not None:
        headers[TRACEPARENT] = (
            f"00-{incoming.trace_id:032x}-{incoming.span_id:016x}-{int(incoming.trace_flags):02x}"
        )


@task_prerun.connect(weak=False)
def _extract(task: Any = None, **_: Any) -> None:
    if not _state.enabled or task is None:
        return
    request = task.request
    carried = getattr(request, TRACEPARENT, None) or (
        (getattr(request, "headers", None) or {}).get(TRACEPARENT)
    )
    _incoming.set(_parse_traceparent(carried) if isinstance(carried, str) else None)


@task_postrun.connect(weak=False)
def _forget(**_: Any) -> None:
    if _state.enabled:
        _incoming.set(None)


def _parse_traceparent(value: str) -> SpanContext | None:
    from opentelemetry.trace import SpanContext, TraceFlags  # noqa: PLC0415

    parts = value.strip().split("-")
    if len(parts) < 4 or len(parts[1]) != 32 or len(parts[2]) != 16:
        return None
    try:
        trace_id, span_id, flags = int(parts[1], 16), int(parts[2], 16), int(parts[3], 16)
    except ValueError:
        return None
    if not trace_id or not span_id:
        return None
    return SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(flags))


@worker_process_shutdown.connect(weak=False)
def _flush(**_: Any) -> None:
    """A prefork pool process leaves with os._exit (no atexit): its batch goes first."""
    if _state.provider is not None:
        _state.provider.force_flush(timeout_millis=5000)
