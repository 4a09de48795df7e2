"""Writers for usage and budgets. Called by the runtime inside its transactions."""

from __future__ import annotations

import datetime
import time
import uuid
from decimal import Decimal

from django.conf import settings
from django.db import connection
from django.db.models import F
from django.utils import timezone

from agents.llm import Usage
from core.events import event_emit
from usage.models import Budget, UsagePurpose


def usage_record_llm_call(
    *,
    agency_id: uuid.UUID,
    site_id: uuid.UUID | None,
    agent_id: uuid.UUID,
    provider: str,
    model: str,
    usage: Usage,
    cost: Decimal,
    runs: int = 0,
    llm_calls: int = 1,
    tool_calls: int = 0,
    purpose: str = UsagePurpose.RUN,
) -> None:
    """Add model calls (and started runs) to today's usage row: one upsert, in the caller's
    transaction. ``purpose``: a run's own calls (its end adds them, with the run) or what after-run
    work called (memory extraction, quality judging), kept on rows of their own."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO usage_usagedaily AS u
                (id, agency_id, site_id, agent_id, date, provider, model, purpose, agent_runs,
                 llm_calls, tool_calls, tokens_input, tokens_output, tokens_cache_read,
                 tokens_cache_write, cost_usd, created_at, updated_at)
            VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, now(), now())
            ON CONFLICT ON CONSTRAINT usage_usagedaily_unique_row DO UPDATE SET
                agent_runs = u.agent_runs + EXCLUDED.agent_runs,
                llm_calls = u.llm_calls + EXCLUDED.llm_calls,
                tool_calls = u.tool_calls + EXCLUDED.tool_calls,
                tokens_input = u.tokens_input + EXCLUDED.tokens_input,
                tokens_output = u.tokens_output + EXCLUDED.tokens_output,
                tokens_cache_read = u.tokens_cache_read + EXCLUDED.tokens_cache_read,
                tokens_cache_write = u.tokens_cache_write + EXCLUDED.tokens_cache_write,
                cost_usd = u.cost_usd + EXCLUDED.cost_usd,
                updated_at = now()
            """,
            [
                uuid.uuid4(),
                agency_id,
                site_id,
                agent_id,
                timezone.localdate(),
                provider,
                model,
                purpose,
                runs,
                llm_calls,
                tool_calls,
                usage.input_tokens,
                usage.output_tokens,
                usage.cache_read_tokens,
                usage.cache_write_tokens,
                cost,
            ],
        )


# Agencies known to have no budget at all, with when that was read: most agencies run without
# one, and the runtime asks before every model call. A budget created later applies within
# AGENTDESK_CATALOGUE_CACHE_SECONDS.
_no_budget: dict[uuid.UUID, float] = {}


def _today_budget_id(agency_id: uuid.UUID, today: datetime.date) -> uuid.UUID | None:
    """Today's budget row; created from the latest earlier limit the first time it is needed.
    No budget ever configured means no limit."""
    if known_without_budget(agency_id):
        return None
    row = Budget.objects.filter(agency_id=agency_id, date=today).values_list("id", flat=True)
    found = row.first()
    if found is not None:
        return found
    latest = Budget.objects.filter(agency_id=agency_id).order_by("-date").first()
    if latest is None:
        _no_budget[agency_id] = time.monotonic()
        return None
    budget, _ = Budget.objects.get_or_create(
        agency_id=agency_id, date=today, defaults={"limit_usd": latest.limit_usd}
    )
    return budget.id


def known_without_budget(agency_id: uuid.UUID) -> bool:
    """True when this process recently found no budget for the agency (no query made)."""
    checked = _no_budget.get(agency_id)
    return (
        checked is not None
        and time.monotonic() - checked < settings.AGENTDESK_CATALOGUE_CACHE_SECONDS
    )


def budget_reserve(*, agency_id: uuid.UUID, amount: Decimal) -> tuple[bool, uuid.UUID | None]:
    """Reserve ``amount`` against today's budget; ``(False, id)`` when it does not fit.

    Atomic: one conditional UPDATE, so concurrent runs cannot overspend together. Runs in the
    caller's transaction (it commits with it).
    """
    budget_id = _today_budget_id(agency_id, timezone.localdate())
    if budget_id is None:
        return True, None
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE usage_budget SET reserved_usd = reserved_usd + %s, updated_at = now()"
            " WHERE id = %s AND used_usd + reserved_usd + %s <= limit_usd",
            [amount, budget_id, amount],
        )
        return cursor.rowcount == 1, budget_id


def budget_exhausted(agency_id: uuid.UUID) -> bool:
    """Whether today's budget has nothing left (spent and reserved reach the limit); ``False``
    without a budget. Off the hot path: for an approved action about to run after a wait."""
    budget_id = _today_budget_id(agency_id, timezone.localdate())
    if budget_id is None:
        return False
    return Budget.objects.filter(
        pk=budget_id, limit_usd__lte=F("used_usd") + F("reserved_usd")
    ).exists()


def budget_settle(*, budget_id: uuid.UUID, reserved: Decimal, cost: Decimal) -> None:
    """Turn a reservation into what the call actually cost (never past the limit). The spending
    that crosses one of ``AGENTDESK_BUDGET_ALERT_PERCENTS`` of the limit emits
    ``ai.budget.threshold_crossed`` (once: only the settle that crosses it sees the crossing)."""
    with connection.cursor() as cursor:
        # The old spending from the row this UPDATE locks (a CTE's snapshot would miss a
        # concurrent settle's).
        cursor.execute(
            """
            WITH old AS (SELECT id, used_usd FROM usage_budget WHERE id = %s FOR UPDATE)
            UPDATE usage_budget b SET
                reserved_usd = GREATEST(b.reserved_usd - %s, 0),
                used_usd = LEAST(b.used_usd + %s, b.limit_usd - GREATEST(b.reserved_usd - %s, 0)),
                updated_at = now()
            FROM old WHERE b.id = old.id
            RETURNING b.agency_id, b.date, old.used_usd, b.used_usd, b.limit_usd
            """,
            [budget_id, reserved, cost, reserved],
        )
        row = cursor.fetchone()
    if row is not None and row[3] > row[2]:
        agency_id, date, before, after, limit = row
        _alert_thresholds(budget_id, agency_id, date, before=before, after=after, limit=limit)


def _alert_thresholds(
    budget_id: uuid.UUID,
    agency_id: uuid.UUID,
    date: datetime.date,
    *,
    before: Decimal,
    after: Decimal,
    limit: Decimal,
) -> None:
    if limit <= 0:
        return
    for percent in sorted(settings.AGENTDESK_BUDGET_ALERT_PERCENTS):
        line = limit * percent / 100
        if before < line <= after:
            event_emit(
                agency_id=agency_id,
                event_type="ai.budget.threshold_crossed",
                payload={
                    "budget_id": str(budget_id),
                    "date": date.isoformat(),
                    "threshold_percent": percent,
                    "used_usd": str(after),
                    "limit_usd": str(limit),
                },
                source_module="usage",
                source_entity_type="budget",
                source_entity_id=str(budget_id),
            )
