"""OpenAI Chat Completions with function calling; with a `base_url`, any OpenAI-compatible server
(Ollama, vLLM, llama.cpp's server): the seed's "Local (Ollama)" provider."""

from agents.llm.openai_provider.provider import OpenAIProvider

__all__ = ["OpenAIProvider"]
