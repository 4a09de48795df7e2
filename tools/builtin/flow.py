"""Flow tools: ``wait`` parks the execution; ``trigger_workflow`` starts subscribed agents.

``ai.*`` event types are the platform's own record (``ai.execution.completed`` starts agents that
follow other agents' results), so an agent may not forge them; ``ai.workflow.*`` is the part of
that namespace reserved for agent-triggered workflows.
"""

from __future__ import annotations

import datetime
import json
import re
from typing import Any

from django.utils import timezone

from core.models import EVENT_TYPE_REGEX
from tools.builtin import _args
from tools.builtin._args import INVALID
from tools.handlers import ToolContext, ToolError, ToolResult
from tools.registry import handler

MAX_WAIT = datetime.timedelta(days=7)  # holds even if the seeded schema's 3600 s cap is loosened
WORKFLOW_PREFIX = "ai.workflow."
MAX_PAYLOAD_BYTES = 32_000
_EVENT_TYPE = re.compile(EVENT_TYPE_REGEX)
_NAME = re.compile(r"^[a-z0-9_]+(\.[a-z0-9_]+)*$")


@handler("wait")
def wait(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    seconds = args.get("seconds")
    if not isinstance(seconds, int) or isinstance(seconds, bool) or seconds < 1:
        raise ToolError(INVALID, "'seconds' must be a positive integer.")
    if seconds > MAX_WAIT.total_seconds():
        raise ToolError(INVALID, f"An execution can wait at most {int(MAX_WAIT.total_seconds())}s.")
    until = timezone.now() + datetime.timedelta(seconds=seconds)
    return ToolResult(
        output={"waiting_until": until.isoformat(), "seconds": seconds}, park_until=until
    )


def workflow_event_type(workflow_id: object) -> str:
    """The event type a workflow id names: a bare name means ``ai.workflow.<name>``."""
    if not isinstance(workflow_id, str) or not workflow_id.strip():
        raise ToolError(INVALID, "'workflow_id' must be a non-empty string.")
    name = workflow_id.strip()
    if "." not in name and _NAME.match(name):
        name = WORKFLOW_PREFIX + name
    if len(name) > 200 or not _EVENT_TYPE.match(name):
        raise ToolError(
            INVALID,
            f"'workflow_id' {name[:80]!r} is not a valid event type: use lowercase letters, "
            "digits and underscores, dot-separated (e.g. 'lead_followup' or "
            "'sales.lead.qualified').",
        )
    if name.startswith("ai.") and not name.startswith(WORKFLOW_PREFIX):
        raise ToolError(
            "reserved_event_type",
            f"Event types starting with 'ai.' are emitted by the platform only; {name!r} "
            f"cannot be triggered. Use a name of your own or '{WORKFLOW_PREFIX}<name>'.",
        )
    return name


@handler("trigger_workflow")
def trigger_workflow(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    event_type = workflow_event_type(args.get("workflow_id"))
    input_data = args.get("input_data") or {}
    if not isinstance(input_data, dict):
        raise ToolError(INVALID, "'input_data' must be an object.")
    try:
        size = len(json.dumps(input_data, allow_nan=False))
    except (TypeError, ValueError):
        raise ToolError(INVALID, "'input_data' must be plain JSON.") from None
    if size > MAX_PAYLOAD_BYTES:
        raise ToolError(
            INVALID, f"'input_data' is {size} bytes; the maximum is {MAX_PAYLOAD_BYTES}."
        )
    payload = {
        "workflow_id": args["workflow_id"],
        "input_data": input_data,
        "execution_id": str(ctx.execution_id),
    }
    # The call's idempotency key: a replayed call finds its event instead of starting agents twice.
    event = _args.emit(
        ctx,
        event_type,
        payload,
        module="ai_agents",
        entity="execution",
        entity_id=ctx.execution_id,
        idempotency_key=ctx.idempotency_key,
    )
    return {"event_id": str(event.id), "event_type": event_type, "status": "triggered"}
