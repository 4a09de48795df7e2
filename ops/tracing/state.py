"""What tracing keeps: on or off, the process's tracer, the ids of a run's trace, and the
context of the thread (the execution it works on, the span context a Celery message carried).

Off unless an OTLP endpoint is configured (``AGENTDESK_OTLP_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_ENDPOINT``): then the SDK is never imported. On, each process sets up its
exporter the first time it opens a span (a forked pool process sets up its own). A run's trace
id is its execution's id, and its first delivery's span id is derived from it too (ops.tracing).
"""

from __future__ import annotations

import contextvars
import os
import threading
import uuid
from typing import TYPE_CHECKING, Any

from django.conf import settings

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import SpanContext, Tracer

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
