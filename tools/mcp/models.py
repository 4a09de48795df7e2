"""The MCP models, defined in :mod:`tools.models.mcp` (Django loads an app's models from its
``models`` package, which imports nothing of ``tools.mcp``); re-exported for the MCP modules and
migration 0011 (``validate_network``)."""

from tools.models.mcp import (
    DEFAULT_TIMEOUT_SECONDS,
    MAX_TIMEOUT_SECONDS,
    SLUG_MAX_LENGTH,
    SLUG_REGEX,
    McpAllowedAddress,
    McpServer,
    validate_network,
)

__all__ = [
    "DEFAULT_TIMEOUT_SECONDS",
    "MAX_TIMEOUT_SECONDS",
    "SLUG_MAX_LENGTH",
    "SLUG_REGEX",
    "McpAllowedAddress",
    "McpServer",
    "validate_network",
]
