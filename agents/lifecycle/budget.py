"""A run's budget reservation given back when the cost of its model call will never be known."""

from __future__ import annotations

import uuid
from decimal import Decimal

from agents.models import Execution
from usage.services import budget_settle


def release_budget_reservation(execution: Execution, *, holder: str | None = None) -> bool:
    """Give back the reservation of a model call whose cost will never be known (its worker was
    lost, the call failed, or the run ended meanwhile); the caller writes ``budget_reservation``
    (cleared). ``holder``: the worker whose call it was, which clears the row itself and gives
    the reservation back only while it still holds the run: if its lease ran out during the
    call, the delivery that claimed the run has given it back already (and the row may hold
    that delivery's own by now). True if given back. Precondition: in the agency's transaction.
    """
    held = execution.budget_reservation
    if not held:
        return False
    execution.budget_reservation = None
    if holder is not None:
        still_held = Execution.objects.filter(
            pk=execution.pk, lease_owner=holder, budget_reservation__isnull=False
        ).update(budget_reservation=None)
        if not still_held:
            return False
    budget_settle(
        budget_id=uuid.UUID(held["budget_id"]), reserved=Decimal(held["amount"]), cost=Decimal(0)
    )
    return True
