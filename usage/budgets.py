"""Writers of the agency's daily budget over the API (the admin's rules, ``usage.admin``).

The runtime keeps a budget's counters; a person sets only the limit of a day (and may add a
future day's row). Today's row is created from the latest earlier limit when first needed
(:func:`usage.services.budget_reserve`), so setting today's limit sets the days after it too.
A limit below what is already spent or reserved that day is refused: the row is locked while
the limit is checked and changed, so a concurrent reservation cannot slip under it.
"""

from __future__ import annotations

import datetime
import uuid
from decimal import Decimal

from django.db import IntegrityError, transaction

from core.exceptions import ApplicationError
from usage.models import Budget


def _invalid(field: str, message: str, *, status: int = 400) -> ApplicationError:
    return ApplicationError(
        "invalid", f"Invalid input. {message}", fields={field: [message]}, status=status
    )


@transaction.atomic
def budget_create(*, agency_id: uuid.UUID, date: datetime.date, limit_usd: Decimal) -> Budget:
    """Precondition: in the agency's context."""
    if limit_usd < 0:
        raise _invalid("limit_usd", "Must not be negative.")
    try:
        with transaction.atomic():
            return Budget.objects.create(agency_id=agency_id, date=date, limit_usd=limit_usd)
    except IntegrityError as exc:
        if "usage_budget_unique_day" in str(exc):
            raise _invalid(
                "date", f"The agency already has a budget for {date}.", status=409
            ) from exc
        raise


@transaction.atomic
def budget_set_limit(*, budget: Budget, limit_usd: Decimal) -> Budget:
    if limit_usd < 0:
        raise _invalid("limit_usd", "Must not be negative.")
    locked = Budget.objects.select_for_update().get(pk=budget.pk)
    committed = locked.used_usd + locked.reserved_usd
    if limit_usd < committed:
        raise _invalid(
            "limit_usd",
            f"Already spent or reserved that day: {committed} USD; the limit cannot be lower.",
        )
    locked.limit_usd = limit_usd
    locked.save(update_fields=["limit_usd", "updated_at"])
    return locked


@transaction.atomic
def budget_delete(*, budget: Budget) -> None:
    """Without any budget row left, the agency's runs have no daily limit."""
    budget.delete()
