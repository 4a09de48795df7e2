"""Log lines of a run carry its execution id and, when tracing is on, the trace and span ids
(``[execution=<id> trace=<id> span=<id>]`` after the logger's name; ``LOGGING`` in settings).
The same values are on each record as ``execution_id``, ``trace_id`` and ``span_id`` for a
structured formatter ("" outside a run or a trace)."""

from __future__ import annotations

import logging

from ops import tracing


class RunContextFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        execution = tracing.current_execution.get()
        ids = tracing.current_ids()
        record.execution_id = str(execution) if execution is not None else ""
        record.trace_id, record.span_id = ids if ids is not None else ("", "")
        parts = []
        if execution is not None:
            parts.append(f"execution={execution}")
        if ids is not None:
            parts.append(f"trace={ids[0]} span={ids[1]}")
        record.run_context = f" [{' '.join(parts)}]" if parts else ""
        return True
