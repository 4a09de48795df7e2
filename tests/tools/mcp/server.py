"""A small MCP server (the SDK's ``MCPServer``, streamable HTTP) for the MCP tests.

Run as a subprocess on 127.0.0.1 (:class:`McpTestServer`); every request must carry
``Authorization: Bearer <token>`` (the header a registered server stores encrypted), else 401.
Its tools: ``add`` (structured result), ``Get-Weather.v2`` (a name the registry must map),
``fail`` (the tool reports an error), ``slow`` (sleeps), ``secret_action`` (for deny tests),
``huge`` (a result of ``size`` characters, for the response limit).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

TOKEN = "Bearer test-mcp-token-7f3a"


class McpTestServer:
    """The server in a subprocess on a free loopback port."""

    def __init__(self) -> None:
        from devkit import embedded

        self.port = embedded.free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> McpTestServer:
        from devkit import embedded

        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__)), "--port", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"MCP test server exited: {self.process.stderr!r}")
            if embedded.port_open(self.port):
                return self
            time.sleep(0.05)
        raise RuntimeError("MCP test server did not listen")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def _app() -> Any:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from starlette.responses import JSONResponse

    server = MCPServer("agentdesk-test")

    @server.tool(description="Add two integers.")
    def add(a: int, b: int) -> dict[str, int]:
        return {"sum": a + b}

    @server.tool(name="Get-Weather.v2", description="The weather in a city.")
    def weather(city: str) -> str:
        return f"Sunny in {city}."

    @server.tool(description="Always fails.")
    def fail(reason: str = "broken") -> str:
        raise ToolError(f"the tool failed: {reason}")  # an anticipated failure: its message goes

    @server.tool(description="Sleeps, then answers.")
    async def slow(seconds: float) -> str:
        import anyio

        await anyio.sleep(seconds)
        return "done"

    @server.tool(description="A result of `size` characters.")
    def huge(size: int) -> str:
        return "x" * size

    @server.tool(description="Something an agent must not do.")
    def secret_action() -> str:
        return "did the secret thing"

    inner = server.streamable_http_app()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization", b"").decode() != TOKEN:
                await JSONResponse({"error": "unauthorized"}, status_code=401)(scope, receive, send)
                return
        await inner(scope, receive, send)

    return app


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    port = parser.parse_args().port
    uvicorn.run(_app(), host="127.0.0.1", port=port, log_level="warning", lifespan="on")


if __name__ == "__main__":
    main()
