"""What the staff home reads: one agency's runs, what waits for a person, today's spend and the
last days' usage. Every selector takes the agency and filters on it explicitly, so it cannot
return another agency's rows even where row-level security lets a request see every agency (a
superuser's); callers also run them inside that agency's tenant context (:func:`home_scope`).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from django.db.models import Count, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from agents.models import TERMINAL_STATUSES, Execution, ExecutionStatus, ExecutionStep
from approvals.models import Approval, ApprovalStatus
from core import tenancy
from core.models import Agency
from usage.charts import CHART_DAYS, DayUsage, daily_series
from usage.models import UsageDaily
from usage.selectors import spend_today  # noqa: F401 - the staff home reads it as home.spend_today

IN_PROGRESS_STATUSES = tuple(
    status for status in ExecutionStatus.values if status not in TERMINAL_STATUSES
)
FAILED_STATUSES = (ExecutionStatus.FAILED, ExecutionStatus.TIMED_OUT)
SUCCESS_RATE_DAYS = 14
PANEL_LIMIT = 10


@contextmanager
def home_scope(agency: Agency) -> Iterator[None]:
    """The block's queries see ``agency`` only, also for a superuser (whose request sees all)."""
    with tenancy.agency_context(agency.pk):
        yield


def _executions(agency: Agency) -> QuerySet[Execution]:
    return Execution.objects.filter(agency=agency).select_related("agent")


def runs_in_progress(*, agency: Agency, limit: int = PANEL_LIMIT) -> list[Execution]:
    """Runs not yet ended (pending, running or parked), oldest start first, each annotated with
    its latest step (``last_step_type``, ``last_tool_name``)."""
    latest = ExecutionStep.objects.filter(execution=OuterRef("pk")).order_by("-step_number")
    return list(
        _executions(agency)
        .filter(status__in=IN_PROGRESS_STATUSES)
        .annotate(
            last_step_type=Subquery(latest.values("step_type")[:1]),
            last_tool_name=Subquery(latest.values("tool_name")[:1]),
        )
        .order_by("-created_at")[:limit]
    )


def count_in_progress(*, agency: Agency) -> int:
    return Execution.objects.filter(agency=agency, status__in=IN_PROGRESS_STATUSES).count()


def recent_finished(*, agency: Agency, limit: int = PANEL_LIMIT) -> list[Execution]:
    """The latest ended runs (completed, failed, cancelled, timed out), newest first."""
    return list(
        _executions(agency)
        .filter(status__in=TERMINAL_STATUSES)
        .order_by(Coalesce("completed_at", "updated_at").desc())[:limit]
    )


def pending_approvals(*, agency: Agency, limit: int = PANEL_LIMIT) -> list[Approval]:
    """Approvals waiting for a decision, oldest first (the queue's order of urgency)."""
    return list(
        Approval.objects.filter(agency=agency, status=ApprovalStatus.PENDING)
        .select_related("agent", "execution")
        .order_by("created_at")[:limit]
    )


def count_pending_approvals(*, agency: Agency) -> int:
    return Approval.objects.filter(agency=agency, status=ApprovalStatus.PENDING).count()


def _open_questions(agency: Agency) -> QuerySet[Execution]:
    # waiting_input also parks runs on a timer or a provider's rate limit: only a run that asked
    # a question (input_request.question) waits for a person.
    return Execution.objects.filter(
        agency=agency,
        status=ExecutionStatus.WAITING_INPUT,
        input_request__has_key="question",
    )


def open_questions(*, agency: Agency, limit: int = PANEL_LIMIT) -> list[Execution]:
    return list(_open_questions(agency).select_related("agent").order_by("updated_at")[:limit])


def count_open_questions(*, agency: Agency) -> int:
    return _open_questions(agency).count()


@dataclass(frozen=True)
class AgentSuccess:
    agent_id: str
    agent_name: str
    completed: int
    failed: int
    cancelled: int

    @property
    def ended(self) -> int:
        return self.completed + self.failed + self.cancelled

    @property
    def rate(self) -> int | None:
        """Completed runs as a share of completed and failed ones (a cancel is nobody's fault)."""
        decided = self.completed + self.failed
        return round(self.completed * 100 / decided) if decided else None


def agent_success_rates(*, agency: Agency, days: int = SUCCESS_RATE_DAYS) -> list[AgentSuccess]:
    """Per agent, its runs that ended in the last ``days`` days, by outcome."""
    since = timezone.now() - datetime.timedelta(days=days)
    rows = (
        Execution.objects.filter(agency=agency, status__in=TERMINAL_STATUSES, created_at__gte=since)
        .order_by()
        .values("agent_id", "agent__name")
        .annotate(
            completed=Count("pk", filter=Q(status=ExecutionStatus.COMPLETED)),
            failed=Count("pk", filter=Q(status__in=FAILED_STATUSES)),
            cancelled=Count("pk", filter=Q(status=ExecutionStatus.CANCELLED)),
        )
        .order_by("agent__name", "agent_id")
    )
    return [
        AgentSuccess(
            agent_id=str(row["agent_id"]),
            agent_name=row["agent__name"],
            completed=row["completed"],
            failed=row["failed"],
            cancelled=row["cancelled"],
        )
        for row in rows
    ]


def usage_days(*, agency: Agency, days: int = CHART_DAYS) -> list[DayUsage]:
    """The agency's cost, tokens and runs per day over the last ``days`` days."""
    return daily_series(rows=UsageDaily.objects.filter(agency=agency), days=days)


@dataclass(frozen=True)
class WaitingCounts:
    approvals: int
    questions: int

    @property
    def total(self) -> int:
        return self.approvals + self.questions


def waiting_counts(*, agency: Agency) -> WaitingCounts:
    return WaitingCounts(
        approvals=count_pending_approvals(agency=agency),
        questions=count_open_questions(agency=agency),
    )
