"""Handing a run back from outside its thread: a draining worker whose drain period ran out
releases the runs its threads still hold (a model or tool call in flight), so another worker
continues them now rather than after the heartbeat timeout (agents/worker_drain.py)."""

from __future__ import annotations

import logging
import uuid

from django.db import DatabaseError, connection

from agents import lifecycle
from agents.models import Execution, ExecutionStatus
from agents.services.start import enqueue_execution
from core import tenancy

logger = logging.getLogger(__name__)

# How long the release waits for a run's row lock: a step's commit holds it for milliseconds.
# A run still locked after that is left to the reaper (its worker's heartbeat says stopped).
RELEASE_LOCK_TIMEOUT = "1s"


def execution_hand_back(
    *, execution_id: uuid.UUID | str, agency_id: uuid.UUID | str, process: str, queue: str | None
) -> bool:
    """Make the run pending again, its lease released, and deliver it (to ``queue``) once that
    commits, if a thread of ``process`` (``host:pid``) still holds it running. Its thread's
    later writes then fail their lease fence: a step in flight is rolled back and done again by
    the next delivery (a tool whose result is not recorded runs once, there). False when the run
    is not held so any more, or its row stayed locked past :data:`RELEASE_LOCK_TIMEOUT`."""
    try:
        with tenancy.agency_context(agency_id):  # (one transaction)
            with connection.cursor() as cursor:
                cursor.execute(f"SET LOCAL lock_timeout = '{RELEASE_LOCK_TIMEOUT}'")
            execution = (
                Execution.objects.select_for_update()
                .filter(
                    pk=execution_id,
                    status=ExecutionStatus.RUNNING,
                    lease_owner__startswith=f"{process}:",
                )
                .first()
            )
            if execution is None:
                return False
            holder = execution.lease_owner
            lifecycle.record_transition(
                execution,
                ExecutionStatus.PENDING,
                reason=f"handed back by {holder}: its worker's drain period ran out",
                triggered_by="worker_draining",
            )
            execution.lease_owner = ""
            execution.save(update_fields=["status", "sequence", "lease_owner", "updated_at"])
            enqueue_execution(execution, queue=queue)
    except DatabaseError as exc:
        logger.warning("execution %s: not handed back (%s); left to the reaper", execution_id, exc)
        return False
    return True
