"""Amounts and counts as the usage pages and the staff home show them."""

from __future__ import annotations

from decimal import Decimal

from django import template

register = template.Library()


@register.filter
def usd(value: Decimal | float | int | None, places: int = 2) -> str:
    """``$1.23``; amounts under a cent keep four places (a run's cost is often tiny)."""
    if value is None:
        return "-"
    amount = Decimal(str(value))
    if amount and abs(amount) < Decimal("0.01"):
        places = 4
    return f"${amount:,.{places}f}"


@register.filter
def compact(value: int | None) -> str:
    """``12.3k``, ``4.5M``: token counts at a glance."""
    if value is None:
        return "-"
    for limit, suffix in ((1_000_000_000, "B"), (1_000_000, "M"), (1_000, "k")):
        if abs(value) >= limit:
            return f"{value / limit:.1f}".rstrip("0").rstrip(".") + suffix
    return str(value)
