"""Anthropic Messages: system prompt as `system=`, tool_use / tool_result blocks, cache tokens."""

from agents.llm.anthropic_provider.provider import AnthropicProvider

__all__ = ["AnthropicProvider"]
