"""The Celery hop of a trace: the span current where a task is sent (a run's tool emitting an
event that starts another agent, a person's decision in a traced request) travels in the
message's ``traceparent`` header, and on through tasks that send others (the event's dispatch);
the delivery it starts links to it. And a prefork pool process flushes its spans before it
leaves.

The handlers are connected to Celery's signals when this module is imported (by ops.tracing).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from celery.signals import before_task_publish, task_postrun, task_prerun, worker_process_shutdown

from ops.tracing.spans import current_ids
from ops.tracing.state import _incoming, _state

if TYPE_CHECKING:
    from opentelemetry.trace import SpanContext

TRACEPARENT = "traceparent"


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
