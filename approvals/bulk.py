"""Approving many low-risk approvals at once (the inbox's "Approve selected"): each one through
:func:`approvals.services.approval_decide`, the one write path of a decision, so a bulk approval
decides an item exactly as a tap on it would, once, whoever else decides it meanwhile."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from agents.models import Execution
from approvals.models import Approval, RiskLevel
from approvals.services import approval_decide
from core.exceptions import ApplicationError

BULK_RISK_LEVELS = (RiskLevel.LOW,)  # what may be approved without opening it
BULK_MAX = 100


@dataclass
class BulkOutcome:
    approved: list[Approval] = field(default_factory=list)
    already_decided: list[Approval] = field(default_factory=list)  # someone else was first
    not_allowed: list[Approval] = field(default_factory=list)  # not low risk: open it to decide
    refused: list[tuple[Approval, ApplicationError]] = field(default_factory=list)


def approval_bulk_approve(
    *, agency_id: uuid.UUID, approval_ids: Iterable[uuid.UUID], user_id: int | None
) -> BulkOutcome:
    """Approve, as proposed, each of the agency's approvals named whose risk is low.

    One :func:`approval_decide` per item, in one order for everyone (by run, then approval, the
    order its locks are taken in), so that two approvers' overlapping selections at once wait
    for each other item by item instead of deadlocking, and the second finds the item decided
    (``already_decided``). Every item's locks are taken, in that order, before the first
    decision: a decision's audit entry locks the agency's audit chain until the transaction
    ends, and a batch that took an item's locks after auditing the one before could wait for
    a second approver who holds them and waits for the chain, a deadlock. At most
    ``BULK_MAX`` items. Precondition: in the agency's context.
    """
    ids = list(dict.fromkeys(approval_ids))
    if not ids:
        raise ApplicationError("nothing_selected", "Select the actions to approve first.")
    if len(ids) > BULK_MAX:
        raise ApplicationError("too_many", f"At most {BULK_MAX} actions at once.")
    outcome = BulkOutcome()
    found = list(
        Approval.objects.filter(agency_id=agency_id, pk__in=ids).order_by("execution_id", "id")
    )
    _lock_all([a for a in found if a.risk_level in BULK_RISK_LEVELS])
    for approval in found:
        if approval.risk_level not in BULK_RISK_LEVELS:
            outcome.not_allowed.append(approval)
            continue
        try:
            outcome.approved.append(
                approval_decide(approval=approval, approve=True, user_id=user_id)
            )
        except ApplicationError as exc:
            if exc.code == "already_decided":
                outcome.already_decided.append(approval)
            else:
                outcome.refused.append((approval, exc))
    return outcome


def _lock_all(approvals: list[Approval]) -> None:
    """The runs' rows, then the approvals', locked in one order (the runtime's: run, then
    item), so that :func:`approval_decide` finds each already locked by this transaction."""
    runs = Execution.objects.filter(pk__in={a.execution_id for a in approvals})
    list(runs.select_for_update().order_by("pk").values_list("pk", flat=True))
    items = Approval.objects.filter(pk__in=[a.pk for a in approvals])
    list(items.select_for_update().order_by("execution_id", "id").values_list("pk", flat=True))
