"""Amounts and counts as the usage pages and the staff home show them."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

from django import template

register = template.Library()
CENT = Decimal("0.01")
MILLIONTH = Decimal("0.000001")  # what usage rows and runs keep (decimal_places=6)


@register.filter
def usd(value: Decimal | float | int | None) -> str:
    """``$1.23``; an amount under a cent as it is kept, to the millionth (``$0.000969``: a run's
    cost is often that small). Every page that shows a cost shows it with this (the run page's
    live figures with live/static/live/execution.js's ``money``, which follows the same rule), so
    that one run's cost reads the same on all of them."""
    if value is None:
        return "-"
    amount = Decimal(str(value))
    if amount and abs(amount) < CENT:
        return f"${amount.quantize(MILLIONTH, ROUND_HALF_UP).normalize():f}"
    return f"${amount.quantize(CENT, ROUND_HALF_UP):,f}"


@register.filter
def compact(value: int | None) -> str:
    """``12.3k``, ``4.5M``: token counts at a glance."""
    if value is None:
        return "-"
    for limit, suffix in ((1_000_000_000, "B"), (1_000_000, "M"), (1_000, "k")):
        if abs(value) >= limit:
            return f"{value / limit:.1f}".rstrip("0").rstrip(".") + suffix
    return str(value)
