"""Model prices: the cost of a model call from its token usage.

Read on every model call, so each process caches prices for a short while; an agency's own row
for a model overrides the platform price.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from decimal import Decimal

from django.db.models import Q

from agents.llm import Usage
from core import tenancy
from core.catalogue import CatalogueCache
from usage.models import ModelPrice

MILLION = Decimal(1_000_000)


@dataclass(frozen=True)
class Price:
    input_per_mtok: Decimal
    output_per_mtok: Decimal
    cache_read_per_mtok: Decimal
    cache_write_per_mtok: Decimal

    def cost(self, usage: Usage) -> Decimal:
        total = (
            usage.input_tokens * self.input_per_mtok
            + usage.output_tokens * self.output_per_mtok
            + usage.cache_read_tokens * self.cache_read_per_mtok
            + usage.cache_write_tokens * self.cache_write_per_mtok
        )
        return (total / MILLION).quantize(Decimal("0.000001"))

    def max_cost(self, *, input_tokens: int, max_output_tokens: int) -> Decimal:
        return self.cost(Usage(input_tokens=input_tokens, output_tokens=max_output_tokens))


FREE = Price(Decimal(0), Decimal(0), Decimal(0), Decimal(0))
_prices = CatalogueCache[Price]()


def price_for(*, agency_id: uuid.UUID, provider: str, model: str) -> Price:
    """The agency's price for ``provider``/``model``; unknown models cost nothing (a local
    server) — add a ModelPrice row to count them."""
    return _prices.get(
        (agency_id, provider, model), lambda: _load_price(agency_id, provider, model)
    )


def _load_price(agency_id: uuid.UUID, provider: str, model: str) -> Price:
    # In the agency's context: row-level security shows its own prices only there (the
    # shared ones everywhere), and the runtime asks from outside any transaction.
    with tenancy.agency_context(agency_id):
        rows = list(
            ModelPrice.objects.filter(Q(agency_id=agency_id) | Q(agency__isnull=True))
            .filter(provider=provider, model=model, is_active=True)
            .order_by("agency_id")  # NULLs last in PostgreSQL: the agency's own price first
        )
    if not rows:
        return FREE
    row = rows[0]
    return Price(
        row.input_per_mtok,
        row.output_per_mtok,
        row.cache_read_per_mtok if row.cache_read_per_mtok is not None else row.input_per_mtok,
        row.cache_write_per_mtok if row.cache_write_per_mtok is not None else row.input_per_mtok,
    )


def clear_cache() -> None:
    _prices.clear()
