"""What a decision point (seed 003 ``agent_execution_decision_points``) holds, for its writers:
the runtime, which writes one with every model reply in the step's own statement
(flow/runtime.py), and the approval services, when a person's denial ends a run
(approvals/services.py).

A model reply's row is on the runtime's hottest path (bench.step_overhead), so it is built
without the ORM's per-field conversions (:func:`core.fastdb.prepared_row`; a test holds
:func:`row` to :func:`core.fastdb.row`'s output) and a delivery serializes its list of
options once, not with every reply (:func:`json_once`).
"""

from __future__ import annotations

import datetime
import json
import uuid
from collections.abc import Sequence
from typing import Any

from psycopg.types.json import Jsonb
from psycopg.types.numeric import Int4

from agents.models import DecisionMethod, DecisionPoint, DecisionType
from approvals.models import ApprovalStatus
from core import fastdb

REASONING_MAX = 4000
# The choices of a person deciding an approval, in this order (``chosen_option_index``).
APPROVAL_OPTIONS = [ApprovalStatus.APPROVED.value, ApprovalStatus.DENIED.value]


def json_once(value: Any) -> Jsonb:
    """``value`` as a JSON parameter serialized now, once, however many rows it goes in."""
    text = json.dumps(value)
    return Jsonb(value, dumps=lambda _: text)


def row(
    *,
    agency_id: uuid.UUID,
    execution_id: uuid.UUID,
    step_id: uuid.UUID | None,
    decided_at: datetime.datetime,
    decision_type: str,
    decision_question: str,
    available_options: Jsonb,
    chosen_option: dict[str, Any],
    chosen_option_index: int | None,
    decision_method: str,
    reasoning: str = "",
    confidence_score: float | None = None,
    rules_applied: Sequence[uuid.UUID] = (),
) -> fastdb.Parts:
    """The INSERT of one decision point, for a step's statement (``tx.defer_row``).
    ``available_options``: from :func:`json_once` (or a ``Jsonb``)."""
    return fastdb.prepared_row(
        DecisionPoint,
        {
            "id": uuid.uuid4(),
            "agency_id": agency_id,
            "created_at": decided_at,
            "updated_at": decided_at,
            "execution_id": execution_id,
            "step_id": step_id,
            "decision_type": decision_type,
            "decision_question": decision_question,
            "available_options": available_options,
            "chosen_option": Jsonb(chosen_option),
            # (typed as Django binds an IntegerField: one prepared statement for any index)
            "chosen_option_index": None
            if chosen_option_index is None
            else Int4(chosen_option_index),
            "reasoning": reasoning,
            "confidence_score": confidence_score,
            "decision_method": decision_method,
            "rules_applied": list(rules_applied),
            "rejected_options": None,
            "rejection_reasons": None,
            "decided_at": decided_at,
        },
    )


def approval_decided(
    *,
    tool_name: str,
    approval_id: uuid.UUID,
    status: str,
    reason: str,
    edited: bool,
    decided_by: int | None,
) -> dict[str, Any]:
    """A person's decision on an approval (fields of :class:`DecisionPoint`): recorded by the
    resumed run when the call it waited for runs or is refused (flow/runtime.py), or by
    ``approval_decide`` when a denial ends the run without resuming it."""
    return {
        "decision_type": DecisionType.RISK_ASSESSMENT,
        "decision_question": f"Approve {tool_name}?",
        "available_options": APPROVAL_OPTIONS,
        "chosen_option": {
            "choice": status,
            "approval_id": str(approval_id),
            "edited": edited,
            "decided_by": decided_by,
        },
        "chosen_option_index": (
            APPROVAL_OPTIONS.index(status) if status in APPROVAL_OPTIONS else None
        ),
        "reasoning": reason[:REASONING_MAX],
        "decision_method": DecisionMethod.USER_INPUT,
        "confidence_score": 1.0,
    }
