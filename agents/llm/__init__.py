"""The LLM provider gateway: the only package that imports the `openai`, `anthropic` and
`google-genai` SDKs (lazily, in `get_provider`, so importing this package stays cheap).

    provider = get_provider(ProviderConfig(kind="anthropic", model="claude-sonnet-4-5"))
    completion = provider.complete(messages, tools)          # or: for event in provider.stream(...)
"""

from agents.llm.base import Provider
from agents.llm.errors import (
    LLMBadRequest,
    LLMConfigurationError,
    LLMDeadlineExceeded,
    LLMError,
    LLMRateLimited,
    LLMUnavailable,
)
from agents.llm.factory import clear_provider_cache, get_provider, resolve_api_key
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
