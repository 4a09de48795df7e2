"""Talking to an MCP server with the official SDK (``mcp`` 2.x): list its tools, call one.

The SDK is asynchronous; the worker is not. :func:`list_tools` and :func:`call_tool` run one
connection each (initialize/discover, the request, close) in an event loop of their own, within
one total time limit (``anyio.fail_after``), and raise :class:`McpClientError` with a code for
every failure: the server refused or unreachable, too slow, a protocol error, a bad answer.
Nothing here touches the database (the caller reads the server row and the allow-list first).

Where it may connect (:mod:`tools.mcp.addresses`): every connection the SDK's HTTP client
(``httpx2``) opens goes through a network backend that resolves the host once, refuses unless
every address is public (the ``web_scrape`` policy, :mod:`tools.net.addresses`) or allowed by a
superuser (:class:`tools.mcp.models.McpAllowedAddress`), and dials the checked address. No
proxy from the environment is used (the check must see the server itself). A plain http URL
may only reach an allow-listed address, and everything a call receives counts against its byte
limit (``Connection.max_response_bytes``, default ``settings.MCP_MAX_RESPONSE_BYTES``): past it,
the call fails with ``response_too_large``.
"""

from __future__ import annotations

import asyncio
import functools
import json
import ssl
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import httpcore2
import httpx2
from django.conf import settings

from tools.mcp.addresses import (
    AddressRefused,
    AllowedAddress,
    ByteBudget,
    CheckedBackend,
)

if TYPE_CHECKING:
    # The SDK takes about 0.5 s to import: only a discovery or a call loads it, not every process
    # that imports the admin or the tool registry.
    from mcp.client import Client

__all__ = [
    "Connection",
    "McpClientError",
    "RemoteTool",
    "call_tool",
    "list_tools",
]

MAX_PAGES = 50  # a paginating server that never ends cannot hang a refresh
MAX_OUTPUT_CHARS = 20_000  # of a result's text: enough to read, not enough to flood the context
USER_AGENT = "AgentDesk-MCP/1.0"


class McpClientError(Exception):
    """A failed discovery or call; ``message`` is written for the model and the admin."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Connection:
    url: str
    headers: dict[str, str] = field(default_factory=dict, repr=False)  # secrets: not in repr
    timeout_s: float = 30.0
    allowed: tuple[AllowedAddress, ...] = ()
    max_response_bytes: int | None = None  # None: settings.MCP_MAX_RESPONSE_BYTES

    @property
    def response_limit(self) -> int:
        if self.max_response_bytes is not None:
            return self.max_response_bytes
        return int(settings.MCP_MAX_RESPONSE_BYTES)


@dataclass(frozen=True)
class RemoteTool:
    name: str
    title: str
    description: str
    input_schema: dict[str, Any]


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    return httpx2.create_ssl_context()


def _http_client(connection: Connection, budget: ByteBudget) -> httpx2.AsyncClient:
    transport = httpx2.AsyncHTTPTransport(verify=_ssl_context(), trust_env=False)
    pool = getattr(transport, "_pool", None)
    # httpx offers no public way to give its connection pool a network backend; the pool reads
    # this attribute for every connection it opens. Fail loudly if an upgrade moved it, rather
    # than connect without the address check.
    if not isinstance(pool, httpcore2.AsyncConnectionPool) or not hasattr(pool, "_network_backend"):
        raise RuntimeError("Cannot check the MCP client's connections: httpx2 changed")
    pool._network_backend = CheckedBackend(
        pool._network_backend,
        connection.allowed,
        plain_http=httpx2.URL(connection.url).scheme == "http",
        budget=budget,
    )
    return httpx2.AsyncClient(
        transport=transport,
        trust_env=False,
        headers={"User-Agent": USER_AGENT, **connection.headers},
        timeout=httpx2.Timeout(connection.timeout_s),
        follow_redirects=False,  # the SDK follows same-origin redirects itself
    )


async def _session[T](
    connection: Connection, budget: ByteBudget, work: Callable[[Client], Awaitable[T]]
) -> T:
    from mcp.client import Client  # noqa: PLC0415 - heavy import, see above
    from mcp.client.streamable_http import streamable_http_client  # noqa: PLC0415

    async with _http_client(connection, budget) as http:
        transport = streamable_http_client(connection.url, http_client=http)
        async with Client(transport, cache=None, read_timeout_seconds=connection.timeout_s) as c:
            return await work(c)


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, its causes and contexts, and the members of exception groups, once each."""
    seen: set[int] = set()
    stack = [exc]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        if isinstance(current, BaseExceptionGroup):
            stack.extend(current.exceptions)
        for linked in (current.__cause__, current.__context__):
            if linked is not None:
                stack.append(linked)


def _too_large(connection: Connection) -> McpClientError:
    return McpClientError(
        "response_too_large",
        f"The MCP server's answer is larger than the limit of {connection.response_limit:,} "
        "bytes: the call was stopped.",
    )


def _translate(exc: BaseException, connection: Connection) -> McpClientError:
    from mcp.shared.exceptions import MCPError  # noqa: PLC0415 - heavy import, see above

    causes = list(_causes(exc))
    for cause in causes:
        if isinstance(cause, AddressRefused):
            return McpClientError("blocked_address", str(cause))
    for cause in causes:
        if isinstance(cause, TimeoutError | httpx2.TimeoutException):
            return McpClientError(
                "timeout",
                f"The MCP server did not answer within {connection.timeout_s:g} s.",
            )
    for cause in causes:
        if isinstance(cause, httpx2.HTTPStatusError):
            return McpClientError(
                "server_error",
                f"The MCP server answered HTTP {cause.response.status_code}.",
            )
        if isinstance(cause, httpx2.TransportError):
            return McpClientError(
                "server_unavailable",
                f"Cannot reach the MCP server: {type(cause).__name__}: {cause}".rstrip(": "),
            )
    for cause in causes:
        if isinstance(cause, MCPError):
            return McpClientError("mcp_error", f"The MCP server refused: {cause.message}")
    return McpClientError(
        "mcp_error", f"The MCP exchange failed: {type(exc).__name__}: {exc}".rstrip(": ")
    )


def _run[T](connection: Connection, work: Callable[[Client], Awaitable[T]]) -> T:
    """Run ``work`` on a connection to the server, within the total time limit."""

    budget = ByteBudget(connection.response_limit)

    async def bounded() -> T:
        with anyio.fail_after(connection.timeout_s):
            return await _session(connection, budget, work)

    try:
        result = _in_own_loop(bounded)
    except McpClientError:
        raise
    except Exception as exc:
        # Whatever the SDK made of the ResponseTooLarge a read raised (an exception group, an
        # MCPError, a wait for the time limit): the budget knows.
        if budget.exceeded:
            raise _too_large(connection) from exc
        raise _translate(exc, connection) from exc
    if budget.exceeded:  # a read the SDK gave up on, but answered all the same
        raise _too_large(connection)
    return result


def _in_own_loop[T](function: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """``asyncio.run`` here, or in a thread when this thread already runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(function())
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = asyncio.run(function())
        except BaseException as exc:  # handed back to the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, name="mcp-client", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    result: T = box["result"]
    return result


def list_tools(connection: Connection) -> list[RemoteTool]:
    """Every tool the server lists (all pages)."""

    async def work(client: Client) -> list[RemoteTool]:
        found: list[RemoteTool] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            page = await client.list_tools(cursor=cursor)
            for tool in page.tools:
                found.append(
                    RemoteTool(
                        name=tool.name,
                        title=tool.title or "",
                        description=tool.description or "",
                        input_schema=dict(tool.input_schema or {}),
                    )
                )
            cursor = page.next_cursor
            if not cursor:
                break
        return found

    return _run(connection, work)


def _content_text(content: list[Any]) -> tuple[str, list[dict[str, Any]]]:
    """The text of a result's content blocks, and a short note for each block that is not text
    (images, audio, resources: the model is told they were there, not sent them)."""
    texts: list[str] = []
    other: list[dict[str, Any]] = []
    for block in content:
        kind = getattr(block, "type", "")
        if kind == "text":
            texts.append(str(block.text))
        else:
            other.append({"type": str(kind), "mime_type": str(getattr(block, "mime_type", ""))})
    return "\n".join(texts), other


def call_tool(connection: Connection, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Call the server's tool ``name``; its result as the model gets it. A result the server
    marks as an error raises ``tool_error`` with its text."""

    async def work(client: Client) -> Any:
        return await client.call_tool(name, arguments)

    result = _run(connection, work)
    text, other = _content_text(list(result.content or []))
    if result.is_error:
        raise McpClientError("tool_error", text[:2000] or f"The MCP tool {name!r} failed.")
    output: dict[str, Any] = {}
    if result.structured_content is not None:
        structured = result.structured_content
        if len(json.dumps(structured, default=str)) <= MAX_OUTPUT_CHARS:
            output["result"] = structured
    if text and "result" not in output:
        output["text"] = text[:MAX_OUTPUT_CHARS]
        if len(text) > MAX_OUTPUT_CHARS:
            output["truncated"] = True
    if other:
        output["other_content"] = other[:20]
    return output
