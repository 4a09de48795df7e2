"""The MCP server (the official SDK's low-level ``Server``): an agency's agents as tools, its
executions as read-only resources. Every handler acts for the :class:`~protocols.mcp.auth.Caller`
the endpoint authenticated for this HTTP request (:mod:`protocols.mcp.asgi`), in that agency's
context: another agency's agent or execution is not found, exactly like a made-up one.

A tool call starts a run of the agent (:mod:`protocols.runs`) and waits for it up to its
``wait_seconds`` argument, capped by ``AGENTDESK_MCP_WAIT_SECONDS``; it returns the output, or
the execution id and status when the run waits for a person (an approval, an answer) or is still
running: the client reads ``agentdesk://executions/{id}`` later.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import mcp_types as types
from django.conf import settings
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from agents.inputs import RESERVED_NAMES, first_error
from agents.models import INPUT_MAX_CHARS, Execution
from protocols import runs
from protocols.mcp.auth import Caller

SCOPE_KEY = "agentdesk.mcp.caller"  # where the endpoint leaves the caller in the ASGI scope
EXECUTION_URI = "agentdesk://executions/{execution_id}"
_EXECUTION_URI = re.compile(r"^agentdesk://executions/(?P<id>[^/?#]+)$")
RESOURCE_NOT_FOUND = -32002  # the MCP specification's code for a resource that does not exist
RECENT_EXECUTIONS = 20  # resources/list: the agency's latest runs
_JSON = "application/json"


def _caller(ctx: ServerRequestContext[Any, Any]) -> Caller:
    request = ctx.request
    caller = request.scope.get(SCOPE_KEY) if request is not None else None
    if not isinstance(caller, Caller):  # the endpoint authenticates every request first
        raise MCPError(types.INVALID_REQUEST, "Not authenticated.")
    return caller


def _limit() -> float:
    return float(settings.AGENTDESK_MCP_WAIT_SECONDS)


def _wait_property() -> dict[str, Any]:
    return {
        "type": "number",
        "minimum": 0,
        "description": (
            "How long to wait for the result before answering with the run's id and "
            f"status (at most {_limit():g} s; default: that limit)."
        ),
    }


def input_schema(declared: dict[str, Any] | None = None) -> dict[str, Any]:
    """A tool's arguments: the agent's declared inputs (:mod:`agents.inputs`) with an optional
    instruction beside them; for an agent that declares none, the API's manual run
    (``POST /agents/{id}/execute/``: an instruction and any data). Both with how long to wait
    for the result (``wait_seconds``)."""
    if declared:
        schema = copy.deepcopy(declared)
        schema["properties"] = {
            **schema["properties"],
            "input": {
                "type": "string",
                "maxLength": INPUT_MAX_CHARS,
                "description": "Optional: anything the agent should know beyond these inputs.",
            },
            "wait_seconds": _wait_property(),
        }
        return schema
    return {
        "type": "object",
        "properties": {
            "input": {
                "type": "string",
                "maxLength": INPUT_MAX_CHARS,
                "description": "The instruction for this run, as a person would write it.",
            },
            "data": {
                "type": "object",
                "description": "Optional trigger data the run can read (any JSON object).",
            },
            "wait_seconds": _wait_property(),
        },
        "required": ["input"],
        "additionalProperties": False,
    }


def run_arguments(
    declared: dict[str, Any] | None, arguments: dict[str, Any]
) -> tuple[str, dict[str, Any] | None]:
    """A tool call's arguments as the run's instruction and trigger data: the declared inputs
    are the data; without them, the ``data`` argument is."""
    if declared:
        data = {k: v for k, v in arguments.items() if k not in RESERVED_NAMES}
        return arguments.get("input", ""), data
    return arguments["input"], arguments.get("data")


def _tool(exposed: runs.ExposedAgent) -> types.Tool:
    return types.Tool(
        name=exposed.name,
        title=exposed.agent.name,
        description=exposed.description,
        input_schema=input_schema(exposed.agent.input_schema),
        annotations=types.ToolAnnotations(
            title=exposed.agent.name, read_only_hint=False, open_world_hint=True
        ),
    )


async def list_tools(
    ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    caller = _caller(ctx)
    exposed = await runs.in_agency(caller.agency_id, runs.exposed_agents, role=caller.role)
    return types.ListToolsResult(tools=[_tool(e) for e in exposed])


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


def _arguments_error(schema: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    """What is wrong with the arguments, for the client (the first error), or ``None``."""
    problem = first_error(schema, arguments)
    return None if problem is None else f"Invalid arguments: {problem}"


def _start(caller: Caller, name: str, arguments: dict[str, Any]) -> runs.RunOutcome | str:
    """The started run, or why none was (sync, in the caller's agency)."""
    exposed = runs.exposed_agent(role=caller.role, name=name)
    if exposed is None:
        return f"Unknown tool {name!r}: no agent of this name that this API key may run."
    declared = exposed.agent.input_schema
    problem = _arguments_error(input_schema(declared), arguments)
    if problem is not None:
        return problem
    text, data = run_arguments(declared, arguments)
    try:
        return runs.run_start(agent=exposed.agent, input=text, data=data, via="mcp")
    except runs.RunNotStarted as exc:
        return f"{exc.code}: {exc.message}"


def outcome_json(outcome: runs.RunOutcome) -> dict[str, Any]:
    """What a client learns of a run: its id, status, and output or error or what it waits for."""
    data: dict[str, Any] = {
        "execution_id": str(outcome.execution_id),
        "status": outcome.status,
        "resource": EXECUTION_URI.format(execution_id=outcome.execution_id),
    }
    if outcome.stop_reason:
        data["stop_reason"] = outcome.stop_reason
    if outcome.finished:
        data["output"] = outcome.output
        if outcome.result:
            data["result"] = outcome.result
        if outcome.error:
            data["error"] = outcome.error
    if outcome.waiting_for_a_person and outcome.input_request:
        data["input_request"] = outcome.input_request
    return data


def _result(outcome: runs.RunOutcome) -> types.CallToolResult:
    data = outcome_json(outcome)
    if outcome.status == "completed":
        text = outcome.output or "(The agent finished with no output.)"
    elif outcome.finished:
        text = f"The run {outcome.status}: {outcome.error or outcome.stop_reason or 'no detail'}"
    elif outcome.waiting_for_a_person:
        text = (
            f"The run is {outcome.status} (execution {outcome.execution_id}); read "
            f"{data['resource']} later for its result."
        )
    else:
        text = (
            f"The run is still {outcome.status} (execution {outcome.execution_id}); read "
            f"{data['resource']} later for its result."
        )
    return types.CallToolResult(
        content=[types.TextContent(text=text)],
        structured_content=data,
        is_error=outcome.finished and outcome.status != "completed",
    )


async def call_tool(
    ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
) -> types.CallToolResult:
    caller = _caller(ctx)
    arguments = params.arguments or {}
    started = await runs.in_agency(caller.agency_id, _start, caller, params.name, arguments)
    if isinstance(started, str):
        return _error(started)
    wait = runs.wait_seconds(arguments.get("wait_seconds"), limit=_limit())
    outcome = await runs.run_wait_async(
        agency_id=caller.agency_id, execution_id=started.execution_id, timeout_s=wait
    )
    return _result(outcome or started)


def _recent(limit: int) -> list[tuple[str, str, str]]:
    rows = Execution.objects.order_by("-created_at").values_list("id", "agent__name", "status")
    return [(str(pk), name, status) for pk, name, status in rows[:limit]]


async def list_resources(
    ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
) -> types.ListResourcesResult:
    caller = _caller(ctx)
    recent = await runs.in_agency(caller.agency_id, _recent, RECENT_EXECUTIONS)
    return types.ListResourcesResult(
        resources=[
            types.Resource(
                name=f"execution-{pk}",
                title=f"{agent}: run {pk[:8]} ({status})",
                uri=EXECUTION_URI.format(execution_id=pk),
                mime_type=_JSON,
            )
            for pk, agent, status in recent
        ]
    )


async def list_resource_templates(
    ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
) -> types.ListResourceTemplatesResult:
    _caller(ctx)
    return types.ListResourceTemplatesResult(
        resource_templates=[
            types.ResourceTemplate(
                name="execution",
                title="An execution (a run of an agent)",
                uri_template=EXECUTION_URI,
                description="A run's status, and its output, error or what it waits for.",
                mime_type=_JSON,
            )
        ]
    )


async def read_resource(
    ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
) -> types.ReadResourceResult:
    caller = _caller(ctx)
    uri = str(params.uri)
    match = _EXECUTION_URI.match(uri)
    outcome = None
    if match is not None:
        outcome = await runs.in_agency(caller.agency_id, runs.run_outcome, execution_id=match["id"])
    if outcome is None:  # malformed, made up, or another agency's: the same answer
        raise MCPError(RESOURCE_NOT_FOUND, f"Resource not found: {uri}")
    return types.ReadResourceResult(
        contents=[
            types.TextResourceContents(
                uri=uri, mime_type=_JSON, text=json.dumps(outcome_json(outcome), default=str)
            )
        ]
    )


def build_server() -> Server[Any]:
    return Server(
        "agentdesk",
        title="AgentDesk",
        instructions=(
            "Each tool runs one of the agency's AgentDesk agents with an instruction (`input`). "
            "A run that needs a person's approval or answer, or takes longer than the wait, "
            "answers with its execution id and status; read agentdesk://executions/{id} later."
        ),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_resource_templates,
        on_read_resource=read_resource,
    )
