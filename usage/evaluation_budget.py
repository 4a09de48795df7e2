"""Writers of the agency's daily evaluation budget (:class:`usage.models.EvaluationBudget`): what
the LLM judge of its experiments may spend, apart from the runs' budget. A judge call reserves
its highest cost with one conditional UPDATE (concurrent judges cannot overspend together) and
settles it with what the call cost. Preconditions: in the agency's context; each a statement of
the caller's transaction."""

from __future__ import annotations

import uuid
from decimal import Decimal

from django.db import connection
from django.utils import timezone

from usage.models import EvaluationBudget


def _today_id(agency_id: uuid.UUID) -> uuid.UUID:
    """Today's row: created the first time from the latest earlier limit, else the default."""
    today = timezone.localdate()
    found = (
        EvaluationBudget.objects.filter(agency_id=agency_id, date=today)
        .values_list("id", flat=True)
        .first()
    )
    if found is not None:
        return found
    latest = (
        EvaluationBudget.objects.filter(agency_id=agency_id, date__lt=today)
        .order_by("-date")
        .first()
    )
    defaults = {"limit_usd": latest.limit_usd} if latest is not None else {}
    budget, _ = EvaluationBudget.objects.get_or_create(
        agency_id=agency_id, date=today, defaults=defaults
    )
    return budget.id


def evaluation_budget_reserve(*, agency_id: uuid.UUID, amount: Decimal) -> uuid.UUID | None:
    """Reserve ``amount`` against today's evaluation budget: the row's id, or None when it does
    not fit (nothing changed)."""
    budget_id = _today_id(agency_id)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE usage_evaluationbudget SET reserved_usd = reserved_usd + %s,"
            " updated_at = now() WHERE id = %s AND used_usd + reserved_usd + %s <= limit_usd",
            [amount, budget_id, amount],
        )
        return budget_id if cursor.rowcount == 1 else None


def evaluation_budget_settle(*, budget_id: uuid.UUID, reserved: Decimal, cost: Decimal) -> None:
    """Turn a reservation into what the call cost (``cost`` 0: released; never past the
    limit)."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            UPDATE usage_evaluationbudget SET
                reserved_usd = GREATEST(reserved_usd - %s, 0),
                used_usd = LEAST(used_usd + %s, limit_usd - GREATEST(reserved_usd - %s, 0)),
                updated_at = now()
            WHERE id = %s
            """,
            [reserved, cost, reserved, budget_id],
        )
