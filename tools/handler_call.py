"""A tool's handler called for the executor (tools/executor.py): in a savepoint, so a failing
handler's writes roll back and the run's transaction stays usable; what it returns made
storable and turned into the call's outcome."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connection, transaction

from core.storable import storable_json
from tools import registry
from tools.calls import CallRequest, ToolOutcome, tool_error
from tools.handlers import ToolContext, ToolError, ToolResult
from tools.models import ToolCallStatus

logger = logging.getLogger(__name__)


def tool_context(request: CallRequest, *, tool_call_id: str, key: str) -> ToolContext:
    """What a handler (or a resumer) is told about the call it runs."""
    return ToolContext(
        agency_id=request.agency_id,
        site_id=request.site_id,
        agent_id=request.agent_id,
        execution_id=request.execution_id,
        tool_call_id=tool_call_id,
        idempotency_key=key,
        triggered_by_user_id=request.triggered_by_user_id,
    )


def run_handler(request: CallRequest, key: str, arguments: dict[str, Any]) -> ToolOutcome:
    """Run the call's handler with ``arguments`` (the model's, or an approver's edit)."""
    handler = registry.get_handler(request.call.name)
    if handler is None:
        return ToolOutcome(
            tool_error("not_implemented", f"Tool {request.call.name!r} has no handler installed."),
            ToolCallStatus.FAILED,
        )
    context = tool_context(request, tool_call_id=request.call.id, key=key)
    try:
        # A savepoint: a failing handler's partial writes go, the run's transaction stays.
        if request.savepoint is None:
            with transaction.atomic():
                result = handler(context, arguments)
        else:
            with _rolled_back_on_error(request.savepoint):
                result = handler(context, arguments)
    except ToolError as exc:
        return ToolOutcome(exc.as_output(), ToolCallStatus.FAILED)
    except Exception as exc:
        logger.exception("tool %s failed", request.call.name)
        return ToolOutcome(
            tool_error("internal_error", f"The tool failed unexpectedly ({type(exc).__name__})."),
            ToolCallStatus.FAILED,
        )
    # What a handler returns is recorded as is (jsonb): a NUL or NaN it passed on from a web
    # page or a provider must not fail the write of the step, and with it the run.
    if isinstance(result, ToolResult):
        return ToolOutcome(
            storable_json(result.output),
            ToolCallStatus.COMPLETED,
            park_until=result.park_until,
            after_commit=list(result.after_commit),
            ask=result.ask,
            awaiting=result.await_run,
        )
    return ToolOutcome(storable_json(result), ToolCallStatus.COMPLETED)


@contextmanager
def _rolled_back_on_error(savepoint: str) -> Iterator[None]:
    """The caller's savepoint instead of a new one (two round trips fewer per tool call: it was
    created with the transaction's first statement, and is never released — COMMIT keeps
    everything after it too)."""
    try:
        yield
    except BaseException:
        with connection.cursor() as cursor:
            cursor.execute(f"ROLLBACK TO SAVEPOINT {savepoint}")
        # Django marked the transaction broken if the handler's query failed; rolled back to a
        # known-good point, it is not.
        transaction.set_rollback(False)
        raise
