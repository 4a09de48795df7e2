"""The A2A endpoints, a Starlette app beside Django's in the ASGI application (config/asgi.py):
the A2A SDK's JSON-RPC dispatcher and its server-sent events need an ASGI request, not a Django
view. Per exposed agent:

* ``GET  /a2a/agents/<agent id>/.well-known/agent-card.json``: its agent card;
* ``POST /a2a/agents/<agent id>/``: its JSON-RPC endpoint (1.0 and 0.3 method names).

Both need an API key of the agent's agency whose role may run it (protocols.a2a.auth). The
request's body is read up to ``AGENTDESK_A2A_MAX_BODY_BYTES``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from a2a.auth.user import User
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes.common import DefaultServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from django.conf import settings
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from protocols.a2a.auth import Refusal, authenticate, exposed_agent
from protocols.a2a.cards import agent_card
from protocols.a2a.handler import CALLER_STATE, AgentDeskRequestHandler, Caller
from protocols.runs import in_agency

PREFIX = "/a2a/"
Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class KeyUser(User):
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return f"API key {self.prefix}"


class CallerContextBuilder(DefaultServerCallContextBuilder):
    """The SDK's call context, with the caller the endpoint checked."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        caller: Caller = request.state.caller
        context.state[CALLER_STATE] = caller
        context.user = KeyUser(caller.key_prefix)
        return context


def _refused(refusal: Refusal) -> JSONResponse:
    headers = {}
    if refusal.status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="api"'
    if refusal.retry_after is not None:
        headers["Retry-After"] = str(refusal.retry_after)
    body = {"message": refusal.message, "code": refusal.code, "extra": {}}
    return JSONResponse(body, status_code=refusal.status, headers=headers)


def _address(request: Request) -> str | None:
    return request.client.host if request.client else None


def _endpoint_url(request: Request, agent_id: str) -> str:
    return str(request.url_for("a2a-endpoint", agent_id=agent_id))


async def card(request: Request) -> Response:
    agent_id = request.path_params["agent_id"]
    try:
        key = await authenticate(request.headers.get("authorization"), _address(request))
        exposed = await exposed_agent(key, agent_id)
    except Refusal as refusal:
        return _refused(refusal)
    built = await in_agency(
        key.agency_id,
        agent_card,
        exposed=exposed,
        endpoint_url=_endpoint_url(request, agent_id),
        provider_url=str(request.base_url),
    )
    return JSONResponse(agent_card_to_dict(built))


def endpoint(dispatcher: JsonRpcDispatcher) -> Callable[[Request], Awaitable[Response]]:
    async def rpc(request: Request) -> Response:
        agent_id = request.path_params["agent_id"]
        try:
            key = await authenticate(request.headers.get("authorization"), _address(request))
            exposed = await exposed_agent(key, agent_id)
        except Refusal as refusal:
            return _refused(refusal)
        request.state.caller = Caller(
            agency_id=key.agency_id, agent_id=exposed.agent.pk, key_prefix=key.prefix
        )
        return await dispatcher.handle_requests(request)

    return rpc


class BodyLimit:
    """Ends reading a body past ``AGENTDESK_A2A_MAX_BODY_BYTES`` with a 413, which the SDK's
    dispatcher answers as a JSON-RPC error (before anything is parsed or started)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        limit = settings.AGENTDESK_A2A_MAX_BODY_BYTES
        read = 0

        async def limited() -> MutableMapping[str, Any]:
            nonlocal read
            message = await receive()
            read += len(message.get("body", b""))
            if read > limit:
                raise HTTPException(413, f"The body is larger than {limit} bytes.")
            return message

        await self.app(scope, limited, send)


async def _not_found(request: Request, exc: Exception) -> Response:
    body = {"message": "No such A2A endpoint.", "code": "not_found", "extra": {}}
    return JSONResponse(body, status_code=404)


async def _not_allowed(request: Request, exc: Exception) -> Response:
    body = {"message": f"{request.method} is not allowed here.", "code": "method_not_allowed",
            "extra": {}}  # fmt: skip
    return JSONResponse(body, status_code=405)


def a2a_app() -> Starlette:
    dispatcher = JsonRpcDispatcher(
        AgentDeskRequestHandler(),
        context_builder=CallerContextBuilder(),
        enable_v0_3_compat=True,
    )
    rpc = endpoint(dispatcher)
    return Starlette(
        routes=[
            Route(
                f"{PREFIX}agents/{{agent_id}}{AGENT_CARD_WELL_KNOWN_PATH}",
                card,
                methods=["GET"],
                name="a2a-card",
            ),
            Route(f"{PREFIX}agents/{{agent_id}}/", rpc, methods=["POST"], name="a2a-endpoint"),
            Route(f"{PREFIX}agents/{{agent_id}}", rpc, methods=["POST"]),
        ],
        exception_handlers={404: _not_found, 405: _not_allowed},
    )


def with_a2a(app: Any) -> ASGIApp:
    """``app`` (Django's), with HTTP requests under ``/a2a/`` sent to the A2A endpoints."""
    a2a = BodyLimit(a2a_app())

    async def route(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith(PREFIX):
            await a2a(scope, receive, send)
        else:
            await app(scope, receive, send)

    return route
