"""Persistence of a run: claiming with a lease (:mod:`.claims`) and one transaction (one commit)
per model reply or tool result (:mod:`.steps`, :mod:`.deferred_commit`). Every write of the loop
goes through here; state changes and the end of a run are the lifecycle's
(:mod:`agents.lifecycle`), which the step transaction writes with.

Fencing: each step transaction ends with one statement — the step's rows inserted as CTEs of an
UPDATE of the execution row ``WHERE lease_owner = <this worker>``. A worker whose lease was taken
over (it stalled, the reaper handed the run to another delivery) matches no row; the statement then
raises (SQLSTATE AD001), the transaction rolls back and :class:`LeaseLost` is raised. The same
UPDATE renews the lease and returns ``cancel_requested_at``, so neither costs a round trip of its
own, and because the failure is an error rather than a row count the COMMIT travels with the
statement. A model reply's whole transaction is one round trip (:func:`direct_step`); see
docs/decisions/0003-runtime-write-path.md.
"""

from agents.runtime.store.claims import (
    CLAIM_LOCK_TIMEOUT,
    Claim,
    claim,
    record_budget_reservation,
    running_seconds,
)
from agents.runtime.store.deferred_commit import commit_in_flight, settle_in_flight
from agents.runtime.store.steps import (
    LEASE_LOST_SQLSTATE,
    LeaseLost,
    StepTransaction,
    direct_step,
    lease_deadline,
    step_transaction,
)

__all__ = [
    "CLAIM_LOCK_TIMEOUT",
    "LEASE_LOST_SQLSTATE",
    "Claim",
    "LeaseLost",
    "StepTransaction",
    "claim",
    "commit_in_flight",
    "direct_step",
    "lease_deadline",
    "record_budget_reservation",
    "running_seconds",
    "settle_in_flight",
    "step_transaction",
]
