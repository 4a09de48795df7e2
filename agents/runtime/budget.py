"""What a run's model calls may spend: the agency's budget, reserved before each call and
settled with its reply, and the provider's own limits, which park the run until their window
ends."""

from __future__ import annotations

import datetime
import time
import uuid
from decimal import Decimal

from agents import lifecycle
from agents.models import ExecutionStatus
from agents.runtime import provider_limits, store
from agents.runtime.run_base import RunBase
from agents.services.resume import schedule_wake
from core import tenancy
from usage import services as usage_services
from usage.pricing import Price


class Budgeting(RunBase):
    """The run's budget reservations and the provider limits' park."""

    def _reserve_budget(
        self, price: Price, input_tokens: int
    ) -> tuple[uuid.UUID, Decimal] | bool | None:
        """``True`` with no budget configured, ``(budget id, amount)`` when reserved, ``None``
        when the step's maximum cost does not fit. A reservation is its own small commit."""
        if usage_services.known_without_budget(self.execution.agency_id):
            return True  # no query, no transaction: the common case stays off the hot path
        self._settle()
        amount = price.max_cost(
            input_tokens=input_tokens, max_output_tokens=self.snapshot["max_tokens"]
        )
        if amount <= 0:
            amount = Decimal(0)
        with tenancy.agency_context(self.execution.agency_id):
            fits, budget_id = usage_services.budget_reserve(
                agency_id=self.execution.agency_id, amount=amount
            )
            if fits and budget_id is not None:  # on the run's row, to release if we are lost
                store.record_budget_reservation(
                    self.execution, self.worker, budget_id=budget_id, amount=amount
                )
        if not fits:
            return None
        return (budget_id, amount) if budget_id is not None else True

    def _release_budget(self, reservation: tuple[uuid.UUID, Decimal] | bool) -> None:
        if isinstance(reservation, tuple):
            self._settle()
            with tenancy.agency_context(self.execution.agency_id):
                lifecycle.release_budget_reservation(self.execution, holder=self.worker)

    def _defer(self, refusal: provider_limits.Refusal) -> str:
        """The provider's own limit is reached: the run waits for the next window without a
        worker instead of failing (woken when it ends: schedule_wake, or beat's timer check)."""
        if self._cancel_requested():
            return self._end_cancelled()
        # At least a second from now: a worker whose clock is behind the one that refused (or
        # a call refused in a minute's last instant) does not come straight back to a full one.
        until = datetime.datetime.fromtimestamp(
            max(refusal.retry_at, time.time() + 1), tz=datetime.UTC
        )
        limit = refusal.describe(self.snapshot["llm_provider"])
        self.meter.rate_limit_parked(refusal.limit)
        with store.step_transaction(self.execution, self.worker) as tx:
            tx.park(
                ExecutionStatus.WAITING_INPUT,
                reason=f"LLM provider rate limit: {limit}",
                wait_until=until,
                input_request={
                    "kind": provider_limits.INPUT_REQUEST_KIND,
                    "limit": refusal.limit,
                    "value": refusal.value,
                    "until": until.isoformat(),
                },
            )
            schedule_wake(self.execution)  # when the window ends, once this commits
        return self._parked(ExecutionStatus.WAITING_INPUT)
