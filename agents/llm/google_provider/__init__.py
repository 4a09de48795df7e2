"""Google Gemini: system instruction, functionCall / functionResponse parts, usage metadata."""

from agents.llm.google_provider.provider import GoogleProvider

__all__ = ["GoogleProvider"]
