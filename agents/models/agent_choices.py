"""The choices of an agent's configuration: its type, its LLM provider, and what happens to a run
caught in a loop or stuck in one state."""

from __future__ import annotations

from django.db import models


class AgentType(models.TextChoices):
    ASSISTANT = "assistant", "Assistant"  # general purpose
    SPECIALIST = "specialist", "Specialist"  # one domain: sales, support, ...
    ORCHESTRATOR = "orchestrator", "Orchestrator"  # delegates to other agents
    ANALYST = "analyst", "Analyst"  # data analysis and reporting
    GUARDIAN = "guardian", "Guardian"  # monitoring and alerting


class ProviderName(models.TextChoices):
    """LLM provider kinds, as the gateway in ``agents/llm`` knows them."""

    OPENAI = "openai", "OpenAI"
    ANTHROPIC = "anthropic", "Anthropic"
    # Any server speaking the OpenAI Chat Completions API (Ollama, vLLM, llama.cpp, ...).
    OPENAI_COMPATIBLE = "openai_compatible", "OpenAI-compatible (local)"
    GOOGLE = "google", "Google Gemini"


class LoopAction(models.TextChoices):
    """What happens to a run caught repeating itself (flow/loops.py)."""

    STOP = "stop", "Stop the run"
    ASK_HUMAN = "ask_human", "Pause and ask a person (inbox)"


class StuckAction(models.TextChoices):
    """What happens to a run that stays in one state longer than expected (flow/stuck.py)."""

    NOTIFY = "notify", "Flag it and notify approvers"
    CANCEL = "cancel", "Flag it, notify approvers and cancel it"
