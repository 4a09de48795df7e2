"""Model calls that memory makes outside a run (extraction after a run, the text of a merge):
through the LLM gateway with the agent's provider and model, and counted like a run's steps —
the call's highest cost reserved against the agency's daily budget first (no call when it does
not fit), its tokens and cost then added to the day's usage (usage.UsageDaily) for the agent and
model. Each of those is a small transaction of its own; the call itself holds none.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from decimal import Decimal

from agents import llm
from agents.llm import Completion, LLMError, Message
from agents.models import Agent
from agents.runtime.context_window import request_chars
from agents.runtime.providers import provider_config_for
from core import tenancy
from ops import metrics
from usage import services as usage_services
from usage.pricing import price_for

logger = logging.getLogger(__name__)

CALL_TIMEOUT_SECONDS = 60.0
CHARS_PER_TOKEN = 4


@dataclass(frozen=True, slots=True)
class ModelCall:
    """The model's reply, or why there is none (``skipped``: "budget_exceeded", "llm_error")."""

    completion: Completion | None
    model: str
    cost: Decimal = Decimal(0)
    skipped: str = ""
    error: str = ""

    @property
    def text(self) -> str:
        return self.completion.text if self.completion is not None else ""

    @property
    def tokens(self) -> int:
        return self.completion.usage.total_tokens if self.completion is not None else 0


# A reservation: (budget id, amount), or True when the agency has no budget.
type Reserved = tuple[uuid.UUID, Decimal] | bool


def agent_model_call(
    *,
    agent: Agent,
    messages: list[Message],
    max_tokens: int,
    provider: str = "",
    model: str = "",
    purpose: str = "memory",
) -> ModelCall:
    """One call of ``agent``'s model (``provider`` / ``model``: a run's own, when it pinned
    them), budgeted and counted. Precondition: outside any transaction (a worker's task)."""
    agency_id = agent.agency_id
    config = provider_config_for(agent, agency_id=agency_id)
    provider = provider or agent.llm_provider
    model = model or config.model
    price = price_for(agency_id=agency_id, provider=provider, model=model)
    highest = price.max_cost(
        input_tokens=request_chars(messages) // CHARS_PER_TOKEN, max_output_tokens=max_tokens
    )
    reserved = _reserve(agency_id, max(highest, Decimal(0)))
    if reserved is None:
        metrics.budget_refused(purpose)
        return ModelCall(None, model, skipped="budget_exceeded")
    try:
        completion = llm.get_provider(config).complete(
            messages,
            model=model or None,
            temperature=0.0,
            max_tokens=max_tokens,
            timeout=CALL_TIMEOUT_SECONDS,
        )
    except LLMError as exc:
        if isinstance(reserved, tuple):
            with tenancy.agency_context(agency_id):
                _settle(reserved, Decimal(0))
        logger.warning("agent %s: %s model call failed: %s", agent.id, purpose, exc)
        return ModelCall(None, model, skipped="llm_error", error=str(exc)[:500])
    cost = price.cost(completion.usage)
    with tenancy.agency_context(agency_id):
        _settle(reserved, cost)
        usage_services.usage_record_llm_call(
            agency_id=agency_id,
            site_id=agent.site_id,
            agent_id=agent.id,
            provider=provider,
            model=model,
            usage=completion.usage,
            cost=cost,
            purpose=purpose,  # on rows of its own: no run's cost includes it
        )
    return ModelCall(completion, model, cost=cost)


def _reserve(agency_id: uuid.UUID, amount: Decimal) -> Reserved | None:
    if usage_services.known_without_budget(agency_id):
        return True
    with tenancy.agency_context(agency_id):
        fits, budget_id = usage_services.budget_reserve(agency_id=agency_id, amount=amount)
    if not fits:
        return None
    return (budget_id, amount) if budget_id is not None else True


def _settle(reserved: Reserved, cost: Decimal) -> None:
    """The reservation turned into what the call cost. Precondition: agency context."""
    if isinstance(reserved, tuple):
        usage_services.budget_settle(budget_id=reserved[0], reserved=reserved[1], cost=cost)
