"""The tools app's models: the tool registry and every call (registry), and the MCP servers
whose tools it lists (mcp), re-exported here."""

from tools.models.mcp import McpAllowedAddress, McpServer
from tools.models.registry import (
    TOOL_NAME_REGEX,
    HandlerType,
    Tool,
    ToolCall,
    ToolCallStatus,
    ToolCategory,
    idempotency_key_for,
)

__all__ = [
    "TOOL_NAME_REGEX",
    "HandlerType",
    "McpAllowedAddress",
    "McpServer",
    "Tool",
    "ToolCall",
    "ToolCallStatus",
    "ToolCategory",
    "idempotency_key_for",
]
