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

The package, by concern:

- :mod:`ops.tracing.state`: on or off, the process's tracer (set up at its first span, again in
  a forked process), the run's trace and root span ids, and the context of the thread (the
  execution it works on, the span context a Celery message carried);
- :mod:`ops.tracing.spans`: the spans the runtime opens and what it records on them;
- :mod:`ops.tracing.propagation`: the Celery hop (``traceparent`` into the messages sent, out
  of the tasks run) and a pool process's last flush. Imported here: its signal handlers are
  connected when ``ops.tracing`` is imported.

The names the runtime, the log filter and tests use are re-exported here.
"""

from __future__ import annotations

from ops.tracing.propagation import TRACEPARENT
from ops.tracing.spans import (
    current_ids,
    delivery,
    delivery_ended,
    model_call,
    model_replied,
    tool_call,
    tool_settled,
)
from ops.tracing.state import (
    configure,
    current_execution,
    disable,
    enabled,
    root_span_id_of,
    trace_id_of,
)

__all__ = [
    "TRACEPARENT",
    "configure",
    "current_execution",
    "current_ids",
    "delivery",
    "delivery_ended",
    "disable",
    "enabled",
    "model_call",
    "model_replied",
    "root_span_id_of",
    "tool_call",
    "tool_settled",
    "trace_id_of",
]
