"""The LLM provider gateway: the only package that imports the `openai`, `anthropic` and
`google-genai` SDKs (lazily, in `get_provider`, so importing this package stays cheap).

    provider = get_provider(ProviderConfig(kind="anthropic", model="claude-sonnet-4-5"))
    completion = provider.complete(messages, tools)          # or: for event in provider.stream(...)

The types and errors are imported with the package; the providers (``Provider``, the HTTP
clients of ``agents.llm.endpoints``, the address checks) and ``get_provider`` only when first
named (PEP 562): the many modules that name a message type need not load the HTTP stack, which
every process would then load at start (``manage.py check`` among them).
"""

import importlib
from typing import TYPE_CHECKING, Any

from agents.llm.errors import (
    LLMBadRequest,
    LLMConfigurationError,
    LLMDeadlineExceeded,
    LLMError,
    LLMRateLimited,
    LLMUnavailable,
)
from agents.llm.types import (
    Completion,
    Message,
    MessageDict,
    ProviderConfig,
    ProviderKind,
    Role,
    StopReason,
    StreamDone,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallComplete,
    ToolCallDelta,
    ToolCallDict,
    ToolDefinition,
    Usage,
    UsageDict,
    UsageUpdate,
)

if TYPE_CHECKING:
    from agents.llm.base import Provider
    from agents.llm.factory import clear_provider_cache, get_provider, resolve_api_key

_LAZY = {
    "Provider": "agents.llm.base",
    "clear_provider_cache": "agents.llm.factory",
    "get_provider": "agents.llm.factory",
    "resolve_api_key": "agents.llm.factory",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value  # once: later lookups find it directly
    return value


__all__ = [
    "Completion",
    "LLMBadRequest",
    "LLMConfigurationError",
    "LLMDeadlineExceeded",
    "LLMError",
    "LLMRateLimited",
    "LLMUnavailable",
    "Message",
    "MessageDict",
    "Provider",
    "ProviderConfig",
    "ProviderKind",
    "Role",
    "StopReason",
    "StreamDone",
    "StreamEvent",
    "TextDelta",
    "ToolCall",
    "ToolCallComplete",
    "ToolCallDelta",
    "ToolCallDict",
    "ToolDefinition",
    "Usage",
    "UsageDict",
    "UsageUpdate",
    "clear_provider_cache",
    "get_provider",
    "resolve_api_key",
]
