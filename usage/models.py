"""Usage and cost: daily and per-period usage (seed 004), daily budgets (seed 001), model prices."""

from __future__ import annotations

import datetime
from decimal import Decimal

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.formats import date_format

from agents.models import Agent, ProviderName
from core.models import AgencyOwnedModel, Site


def _non_negative(fields: list[str], name: str) -> models.CheckConstraint:
    return models.CheckConstraint(
        condition=models.Q(**{f"{field}__gte": 0 for field in fields}), name=name
    )


def today() -> datetime.date:
    """Today in the project's time zone (budgets reset at local midnight)."""
    return timezone.localdate()


class UsagePurpose(models.TextChoices):
    """What a row's model calls were for: a run's own (its steps, counted on the run), an
    experiment's runs (evaluation: real spend, but no run of the agent's), or the work after a
    run that the budget counts too but no run's cost includes."""

    RUN = "run", "Runs"
    MEMORY_EXTRACTION = "memory_extraction", "Memory extraction (after runs)"
    QUALITY_JUDGE = "quality_judge", "Quality judging (after runs)"
    MEMORY_MERGE = "memory_merge", "Memory consolidation"
    MEMORY = "memory", "Memory"
    # An experiment's runs (evals/): real spend, the budget counts it, but no run of the agent's.
    EVALUATION = "evaluation", "Evaluations"


class UsageDaily(AgencyOwnedModel):
    """Usage of one day, per agent and model (seed 004 ``ai_usage_daily``, one row per site/day).

    Finer than the seed (it kept a ``runs_by_agent`` JSON): per-agent and per-model rows let the
    runtime upsert with one ``ON CONFLICT`` and make "cost by agent / by model" a GROUP BY. The
    agent reference is kept without a database foreign key so that deleting an agent keeps its
    billing history.
    """

    site = models.ForeignKey(
        Site, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    agent = models.ForeignKey(
        Agent,
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="+",
    )
    date = models.DateField()
    # The provider's kind, shown with its label ("OpenAI-compatible (local)").
    provider = models.CharField(max_length=32, blank=True, choices=ProviderName.choices)
    model = models.CharField(max_length=100, blank=True)
    # Runs apart from what memory and quality judging called after them: the "run" rows' cost is
    # the sum of the ended runs' own cost (Execution.cost_usd), figure for figure.
    purpose = models.CharField(
        "used for", max_length=32, choices=UsagePurpose.choices, default=UsagePurpose.RUN
    )

    agent_runs = models.PositiveIntegerField("runs", default=0)
    llm_calls = models.PositiveIntegerField("LLM calls", default=0)
    tool_calls = models.PositiveIntegerField(default=0)
    tokens_input = models.PositiveBigIntegerField("input tokens", default=0)
    tokens_output = models.PositiveBigIntegerField("output tokens", default=0)
    tokens_cache_read = models.PositiveBigIntegerField("cache read tokens", default=0)
    tokens_cache_write = models.PositiveBigIntegerField("cache write tokens", default=0)
    cost_usd = models.DecimalField(
        "cost (USD)", max_digits=14, decimal_places=6, default=Decimal(0)
    )

    class Meta:
        ordering = ["-date"]
        # A row is one agent's use of one model on one day, for one purpose: several a day.
        verbose_name = "daily usage row"
        verbose_name_plural = "daily usage rows"
        indexes = [models.Index(fields=["site", "-date"], name="usage_daily_site_date_idx")]
        constraints = [
            models.UniqueConstraint(
                fields=["agency", "site", "agent", "date", "provider", "model", "purpose"],
                nulls_distinct=False,
                name="usage_usagedaily_unique_row",
            ),
            models.CheckConstraint(
                condition=models.Q(purpose__in=UsagePurpose.values),
                name="usage_usagedaily_purpose_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(provider__in=[*ProviderName.values, ""]),
                name="usage_usagedaily_provider_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.date} {self.model or '-'}: {self.cost_usd} USD"

    @property
    def tokens_used(self) -> int:
        return (
            self.tokens_input
            + self.tokens_output
            + self.tokens_cache_read
            + self.tokens_cache_write
        )


class UsagePeriod(AgencyOwnedModel):
    """Usage of a billing period against its included quota (seed 004 ``ai_usage_tracking``)."""

    site = models.ForeignKey(
        Site, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    period_start = models.DateField("starts")
    period_end = models.DateField("ends")

    total_agent_runs = models.PositiveIntegerField("runs", default=0)
    total_tokens_input = models.PositiveBigIntegerField("input tokens", default=0)
    total_tokens_output = models.PositiveBigIntegerField("output tokens", default=0)
    total_tool_calls = models.PositiveIntegerField("tool calls", default=0)
    total_approvals = models.PositiveIntegerField("approvals", default=0)
    usage_by_provider = models.JSONField("usage by provider", default=dict, blank=True)
    estimated_cost = models.DecimalField(
        "estimated cost (USD)", max_digits=14, decimal_places=6, default=Decimal(0)
    )

    included_runs = models.PositiveIntegerField("runs included", default=500)
    included_tokens = models.PositiveBigIntegerField("tokens included", default=500_000)
    overage_runs = models.PositiveIntegerField("runs over the quota", default=0)
    overage_tokens = models.PositiveBigIntegerField("tokens over the quota", default=0)

    class Meta:
        ordering = ["-period_start"]
        constraints = [
            models.UniqueConstraint(
                fields=["agency", "site", "period_start", "period_end"],
                nulls_distinct=False,
                name="usage_usageperiod_unique_period",
            ),
            models.CheckConstraint(
                condition=models.Q(period_end__gte=models.F("period_start")),
                name="usage_usageperiod_period_order",
            ),
        ]

    def __str__(self) -> str:
        start, end = date_format(self.period_start, "M j"), date_format(self.period_end, "M j, Y")
        return f"{start} to {end}"  # "Nov 1 to Nov 30, 2026"


class Budget(AgencyOwnedModel):
    """An agency's spending for one day against its limit (seed 001 ``agent_budget``).

    The runtime reserves a step's maximum cost (``reserved_usd``) before calling the model and
    settles it into ``used_usd`` afterwards, both with a conditional UPDATE, so that concurrent
    runs cannot overspend: the CHECK constraint refuses ``used + reserved > limit``.
    """

    date = models.DateField(default=today)
    limit_usd = models.DecimalField(max_digits=12, decimal_places=4, default=Decimal("5.00"))
    used_usd = models.DecimalField(max_digits=12, decimal_places=6, default=Decimal(0))
    reserved_usd = models.DecimalField(max_digits=12, decimal_places=6, default=Decimal(0))

    invocations_count = models.PositiveIntegerField(default=0)  # triggers that started a run
    executions_started = models.PositiveIntegerField(default=0)
    executions_completed = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-date"]
        constraints = [
            models.UniqueConstraint(fields=["agency", "date"], name="usage_budget_unique_day"),
            _non_negative(["limit_usd", "used_usd", "reserved_usd"], "usage_budget_non_negative"),
            models.CheckConstraint(
                condition=models.Q(used_usd__lte=models.F("limit_usd") - models.F("reserved_usd")),
                name="usage_budget_within_limit",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.date}: {self.used_usd} / {self.limit_usd} USD"

    @property
    def remaining_usd(self) -> Decimal:
        return self.limit_usd - self.used_usd - self.reserved_usd


def _evaluation_limit() -> Decimal:
    return Decimal(str(settings.AGENTDESK_EVALUATION_BUDGET_USD))


class EvaluationBudget(AgencyOwnedModel):
    """What the LLM judge of the agency's experiments (evals/judge.py) may spend in one day,
    apart from :class:`Budget` (the runs'): a judge call reserves its highest cost here first and
    is not made when it does not fit. Today's row is created on the first judge call of the day
    from the latest earlier limit, else ``AGENTDESK_EVALUATION_BUDGET_USD``."""

    date = models.DateField(default=today)
    limit_usd = models.DecimalField(max_digits=12, decimal_places=4, default=_evaluation_limit)
    used_usd = models.DecimalField(max_digits=12, decimal_places=6, default=Decimal(0))
    reserved_usd = models.DecimalField(max_digits=12, decimal_places=6, default=Decimal(0))

    class Meta:
        ordering = ["-date"]
        constraints = [
            models.UniqueConstraint(
                fields=["agency", "date"], name="usage_evaluationbudget_unique_day"
            ),
            _non_negative(
                ["limit_usd", "used_usd", "reserved_usd"], "usage_evaluationbudget_non_negative"
            ),
            models.CheckConstraint(
                condition=models.Q(used_usd__lte=models.F("limit_usd") - models.F("reserved_usd")),
                name="usage_evaluationbudget_within_limit",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.date}: {self.used_usd} / {self.limit_usd} USD (evaluations)"

    @property
    def remaining_usd(self) -> Decimal:
        return self.limit_usd - self.used_usd - self.reserved_usd


class ModelPrice(AgencyOwnedModel):
    """List price of a model in USD per million tokens.

    Platform prices (``agency`` NULL) are seeded by a migration and readable by every agency;
    they are editable (admin, superusers) because providers change prices. An agency row for the
    same provider and model overrides the platform price (a negotiated rate).
    """

    agency = models.ForeignKey(  # type: ignore[assignment]
        "core.Agency", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    provider = models.CharField(max_length=32, choices=ProviderName.choices)
    model = models.CharField(max_length=100)
    input_per_mtok = models.DecimalField(max_digits=12, decimal_places=6)
    output_per_mtok = models.DecimalField(max_digits=12, decimal_places=6)
    cache_read_per_mtok = models.DecimalField(
        max_digits=12, decimal_places=6, null=True, blank=True
    )
    cache_write_per_mtok = models.DecimalField(
        max_digits=12, decimal_places=6, null=True, blank=True
    )
    is_active = models.BooleanField("active", default=True)

    class Meta:
        ordering = ["provider", "model"]
        constraints = [
            models.UniqueConstraint(
                fields=["agency", "provider", "model"],
                nulls_distinct=False,
                name="usage_modelprice_unique_model",
            ),
            models.CheckConstraint(
                condition=models.Q(provider__in=ProviderName.values),
                name="usage_modelprice_provider_valid",
            ),
            _non_negative(["input_per_mtok", "output_per_mtok"], "usage_modelprice_non_negative"),
        ]

    def __str__(self) -> str:
        return f"{self.provider}/{self.model}"
