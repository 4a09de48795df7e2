"""The spans of a run: one per delivery (``invoke_agent``), per model call (``chat``) and per
tool call (``execute_tool``), with the GenAI semantic conventions' attributes (ops.tracing).

Tracing off, each returns at once: no span, no SDK import, no allocation per call (the runtime
calls them on its hot path).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any

from ops.tracing.state import (
    _forced_ids,
    _incoming,
    _state,
    _tracer,
    current_execution,
    root_span_id_of,
    trace_id_of,
)

if TYPE_CHECKING:
    from opentelemetry.trace import Span, SpanContext

    from agents.llm import Completion
    from agents.models import Agent, Execution

# What a span's block gets when tracing is off (no generator, no allocation per call).
_OFF: AbstractContextManager[None] = nullcontext()


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
