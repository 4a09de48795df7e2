"""The fake LLM provider: a loopback HTTP server speaking the OpenAI Chat Completions, Anthropic
Messages and Gemini API (generateContent) wire formats, replaying scripts. Used by tests,
benchmarks and local development (`python -m devkit.fake_server --port 8765`)."""

from devkit.fake_server.script import (
    Hang,
    HttpError,
    RawReply,
    RecordedRequest,
    Reply,
    Responder,
    Script,
    ScriptedToolCall,
    Step,
    by_turn,
    echo_responder,
    hang,
    malformed_tool_call_reply,
    rate_limited,
    react_responder,
    server_error,
    text_reply,
    tool_call_reply,
)
from devkit.fake_server.server import SCRIPT_HEADER, FakeProviderServer

__all__ = [
    "SCRIPT_HEADER",
    "FakeProviderServer",
    "Hang",
    "HttpError",
    "RawReply",
    "RecordedRequest",
    "Reply",
    "Responder",
    "Script",
    "ScriptedToolCall",
    "Step",
    "by_turn",
    "echo_responder",
    "hang",
    "malformed_tool_call_reply",
    "rate_limited",
    "react_responder",
    "server_error",
    "text_reply",
    "tool_call_reply",
]
