"""Flow tools: ``wait`` parks the execution; ``trigger_workflow`` starts subscribed agents.

``trigger_workflow`` emits ``ai.workflow.<name>`` events and nothing else. Every other event type
records something that happened on the platform (``crm.contact.created``, ``form.submitted``,
``ai.execution.completed``) and starts the agents subscribed to it, so a model that could emit one
could start them with a payload it made up. ``ai.*`` is also closed to API clients, so an
``ai.workflow.*`` event always comes from an agent. Agents that should run when a workflow is
triggered subscribe to it like to any event: ``ai.workflow.lead_followup`` in their trigger
events (the triggering agent itself is not re-started by its own ``ai.*`` events).
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
from tools.handlers import HumanQuestion, ToolContext, ToolError, ToolResult
from tools.registry import handler

MAX_WAIT = datetime.timedelta(days=7)  # holds even if the seeded schema's 3600 s cap is loosened
WORKFLOW_PREFIX = "ai.workflow."
MAX_PAYLOAD_BYTES = 32_000
_EVENT_TYPE = re.compile(EVENT_TYPE_REGEX)
_NAME = re.compile(r"^[a-z0-9_]+(\.[a-z0-9_]+)*$")


@handler("wait")
def wait(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    seconds = _args.whole_number(args.get("seconds"))  # 5.0 is the schema's integer 5
    if seconds is None or seconds < 1:
        raise ToolError(INVALID, "'seconds' must be a positive integer.")
    if seconds > MAX_WAIT.total_seconds():
        raise ToolError(INVALID, f"An execution can wait at most {int(MAX_WAIT.total_seconds())}s.")
    until = timezone.now() + datetime.timedelta(seconds=seconds)
    return ToolResult(
        output={"waiting_until": until.isoformat(), "seconds": seconds}, park_until=until
    )


QUESTION_MAX_CHARS = 2000
MAX_OPTIONS = 10
OPTION_MAX_CHARS = 200


@handler("ask_user")
def ask_user(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    """Ask the agency's people a question; the run waits (holding no worker) and the answer is
    this call's result. Seed 000's clarifications: with options when the agent can offer some."""
    question = _args.text(args, "question", max_length=QUESTION_MAX_CHARS, required=True)
    options = args.get("options") or []
    if not isinstance(options, list) or len(options) > MAX_OPTIONS:
        raise ToolError(INVALID, f"'options' must be a list of at most {MAX_OPTIONS} answers.")
    cleaned = []
    for option in options:
        if (
            not isinstance(option, str)
            or not option.strip()
            or len(option) > OPTION_MAX_CHARS
            or "\x00" in option
        ):
            raise ToolError(
                INVALID, f"Each option must be a non-empty text of at most {OPTION_MAX_CHARS}."
            )
        if option.strip() not in cleaned:
            cleaned.append(option.strip())
    allow_other = args.get("allow_other", True)
    return ToolResult(
        output={"status": "waiting_input"},
        ask=HumanQuestion(
            question=question,
            options=cleaned,
            allow_other=bool(allow_other) or not cleaned,
            question_type=str(args.get("question_type") or "")[:50],
        ),
    )


def workflow_event_type(workflow_id: object) -> str:
    """The event type a workflow id names: a bare name without dots (``lead_followup``) or
    ``ai.workflow.<name>`` (dots allowed in the name) both mean ``ai.workflow.<name>``; anything
    else — a dotted name without the prefix is another module's event type — is refused."""
    if not isinstance(workflow_id, str) or not workflow_id.strip():
        raise ToolError(INVALID, "'workflow_id' must be a non-empty string.")
    given = workflow_id.strip()
    name = given.removeprefix(WORKFLOW_PREFIX)
    allowed_form = (
        f"'workflow_id' must be a workflow name such as 'lead_followup' (emitted as "
        f"'{WORKFLOW_PREFIX}lead_followup') or '{WORKFLOW_PREFIX}<name>': lowercase letters, "
        "digits and underscores, dot-separated after the prefix."
    )
    if name == given and "." in given and _EVENT_TYPE.match(given):
        # A platform event type (or another module's): never emitted by an agent.
        raise ToolError(
            "reserved_event_type",
            f"{given[:80]!r} is not a workflow: only '{WORKFLOW_PREFIX}*' events can be "
            f"triggered; other event types are emitted by the platform. {allowed_form}",
            field="workflow_id",
        )
    event_type = WORKFLOW_PREFIX + name
    if not _NAME.match(name) or len(event_type) > 200:
        raise ToolError(
            INVALID,
            f"{given[:80]!r} is not a valid workflow name. {allowed_form}",
            field="workflow_id",
        )
    return event_type


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
