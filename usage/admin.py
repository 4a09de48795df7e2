"""Usage and cost: measurements are read-only; an agency admin sets the daily budget's limit (from
a day on: the next days keep it).
Model prices: the platform's are changed by superusers, an agency's own rates by its admins."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import Model
from django.http import HttpRequest
from django.utils.formats import date_format
from django.utils.html import format_html_join
from django.utils.safestring import SafeString

from agents.admin.common import EMPTY
from agents.models import ProviderName
from core.admin_empty import EmptyState
from core.admin_scoping import (
    ADMIN_ROLES,
    AgencyScopedAdmin,
    ReadOnlyAdminMixin,
    SharedRowsAdmin,
    request_agency,
)
from usage.admin_mixins import CsvExportMixin, UsageChartsMixin
from usage.models import Budget, EvaluationBudget, ModelPrice, UsageDaily, UsagePeriod, today
from usage.selectors import spend_today
from usage.templatetags.usage_format import compact, usd


@admin.register(UsageDaily)
class UsageDailyAdmin(UsageChartsMixin, ReadOnlyAdminMixin, AgencyScopedAdmin):
    # The 14-day charts and "Export CSV" above the list, of the rows it selects (admin_mixins).
    csv_columns = [
        ("date", "date"), ("site", "site__name"), ("agent", "agent__name"),
        ("agent_id", "agent_id"), ("provider", "provider"), ("model", "model"),
        ("purpose", "purpose"), ("agent_runs", "agent_runs"), ("llm_calls", "llm_calls"),
        ("tool_calls", "tool_calls"),
        ("tokens_input", "tokens_input"), ("tokens_output", "tokens_output"),
        ("tokens_cache_read", "tokens_cache_read"), ("tokens_cache_write", "tokens_cache_write"),
        ("cost_usd", "cost_usd"),
    ]  # fmt: skip
    # "Used for": a run's own model calls (its row's cost is its runs' cost, as the run's page
    # and the list of runs say it) apart from memory extraction and quality judging after runs.
    list_display = [
        "date", "site", "agent", "provider", "model", "purpose", "agent_runs", "llm_calls",
        "tool_calls", "tokens_input", "tokens_output", "cost",
    ]  # fmt: skip
    list_filter = [
        "purpose", "provider", "model", ("agent", admin.RelatedOnlyFieldListFilter),
    ]  # fmt: skip
    list_select_related = ["site", "agent"]
    date_hierarchy = "date"
    search_fields = ["model"]

    @admin.display(description="Cost", ordering="cost_usd")
    def cost(self, obj: UsageDaily) -> str:
        return usd(obj.cost_usd)


USED_FIELDS = (
    "total_agent_runs", "total_tokens_input", "total_tokens_output", "total_tool_calls",
    "total_approvals", "by_provider",
)  # fmt: skip


@admin.register(UsagePeriod)
class UsagePeriodAdmin(CsvExportMixin, ReadOnlyAdminMixin, AgencyScopedAdmin):
    """A billing period's usage against the runs and tokens its plan includes (seed 004): kept by
    the platform's operator, read here; the list says what a period is while there is none."""

    empty_state = EmptyState(
        "No usage period yet",
        "A usage period is a billing period of your agency's plan (a month, say): the runs and "
        "tokens the plan includes, what your agents used in it, its estimated cost and what went "
        "over. Periods are recorded by the platform's operator for agencies on such a plan; "
        "until one is, nothing is counted or capped by period. What your agents use day by day "
        "is under Daily usage, and a daily limit on their spending is a budget.",
        link_label="Daily usage",
        link_url_name="admin:usage_usagedaily_changelist",
    )
    csv_columns = [
        ("period_start", "period_start"), ("period_end", "period_end"), ("site", "site__name"),
        ("total_agent_runs", "total_agent_runs"), ("total_tokens_input", "total_tokens_input"),
        ("total_tokens_output", "total_tokens_output"), ("total_tool_calls", "total_tool_calls"),
        ("total_approvals", "total_approvals"), ("estimated_cost", "estimated_cost"),
        ("included_runs", "included_runs"), ("included_tokens", "included_tokens"),
        ("overage_runs", "overage_runs"), ("overage_tokens", "overage_tokens"),
    ]  # fmt: skip
    list_display = [
        "period", "site_shown", "runs", "tokens", "total_tool_calls", "total_approvals", "cost",
        "overage",
    ]  # fmt: skip
    list_display_links = ["period"]
    list_select_related = ["site"]
    date_hierarchy = "period_start"
    fieldsets = [
        (None, {"fields": ["period", "site_shown", "cost"]}),
        ("Used in the period", {"fields": USED_FIELDS}),
        (
            "The plan's quota",
            {"fields": ["included_runs", "included_tokens", "overage_runs", "overage_tokens"]},
        ),
    ]

    @admin.display(description="Period", ordering="period_start")
    def period(self, obj: UsagePeriod) -> str:
        return str(obj)

    @admin.display(description="Site", ordering="site__name")
    def site_shown(self, obj: UsagePeriod) -> str:
        return obj.site.name if obj.site is not None else "All sites"

    @admin.display(description="Runs", ordering="total_agent_runs")
    def runs(self, obj: UsagePeriod) -> str:
        return f"{obj.total_agent_runs} of {obj.included_runs} included"

    @admin.display(description="Tokens")
    def tokens(self, obj: UsagePeriod) -> str:
        used = obj.total_tokens_input + obj.total_tokens_output
        return f"{compact(used)} of {compact(obj.included_tokens)} included"

    @admin.display(description="Estimated cost", ordering="estimated_cost")
    def cost(self, obj: UsagePeriod) -> str:
        return usd(obj.estimated_cost)

    @admin.display(description="Over the quota")
    def overage(self, obj: UsagePeriod) -> str:
        over = [f"{obj.overage_runs} runs"] if obj.overage_runs else []
        over += [f"{compact(obj.overage_tokens)} tokens"] if obj.overage_tokens else []
        return ", ".join(over) or "None"

    @admin.display(description="Usage by provider")
    def by_provider(self, obj: UsagePeriod) -> SafeString | str:
        """Each provider by its name (the LLM providers page's), its figures in words."""
        if not obj.usage_by_provider:
            return EMPTY
        names = dict(ProviderName.choices)
        lines = []
        for key, value in obj.usage_by_provider.items():
            figures = (
                ", ".join(_figure(name, figure) for name, figure in value.items())
                if isinstance(value, dict)
                else str(value)
            )
            lines.append((names.get(key, key.replace("_", " ")), figures))
        return format_html_join(SafeString("<br>"), "{}: {}", lines)


def _figure(name: str, value: object) -> str:
    """``cost_usd: 0.42`` as "cost $0.42", ``runs: 12`` as "runs 12"."""
    if name.endswith("_usd") and isinstance(value, int | float | str):
        return f"{name.removesuffix('_usd').replace('_', ' ')} {usd(Decimal(str(value)))}"
    return f"{name.replace('_', ' ')} {value}"


class BudgetForm(forms.ModelForm[Budget]):
    """Only the day a limit starts on and the limit: the runtime keeps the rest."""

    class Meta:
        model = Budget
        fields = ["date", "limit_usd"]
        labels = {"date": "Starts on", "limit_usd": "Daily limit (USD)"}
        help_texts = {
            "date": "The limit applies from this day on, every day, until a budget starting on "
            "a later day sets another. Today's date sets a daily budget from now on.",
            "limit_usd": "What all of the agency's agents may spend together in one day (from "
            "midnight, server time) on model calls: runs, memory extraction and quality "
            "judging, at the model prices. A run whose next model call does not fit stops, "
            'marked "Daily budget exceeded"; tools cost nothing.',
        }

    def clean_limit_usd(self) -> Any:
        limit = self.cleaned_data["limit_usd"]
        committed = self.instance.used_usd + self.instance.reserved_usd
        if limit is not None and limit < committed:
            raise forms.ValidationError(
                f"Already spent or reserved that day: {usd(committed)}; the limit cannot be lower."
            )
        return limit


@admin.register(Budget)
class BudgetAdmin(CsvExportMixin, AgencyScopedAdmin):
    """A daily limit on the agency's model spending, one row per day: the list says what a budget
    is and today's spend against it; the form asks for the day it starts and the limit only (the
    runtime's counters, reservations and run counts, stay in the CSV export)."""

    empty_state = EmptyState(
        "No budget yet",
        "A budget is a daily limit on what your agency's agents spend together on model calls "
        "(runs, memory extraction, quality judging; tools cost nothing). It recurs: from the day "
        "it starts on, every day after it, until one starting later sets another limit. A run "
        "whose next call would not fit stops. Without one, spending is not capped. Add one "
        "starting today to set a limit.",
    )

    csv_columns = [
        ("date", "date"), ("limit_usd", "limit_usd"), ("used_usd", "used_usd"),
        ("reserved_usd", "reserved_usd"), ("invocations_count", "invocations_count"),
        ("executions_started", "executions_started"),
        ("executions_completed", "executions_completed"),
    ]  # fmt: skip
    form = BudgetForm
    write_roles = ADMIN_ROLES
    list_before_template = "usage/admin/budget_before_list.html"
    list_display = ["day", "daily_limit", "spent", "left"]
    date_hierarchy = "date"
    fields = ["date", "limit_usd"]

    @admin.display(description="Day", ordering="date")
    def day(self, obj: Budget) -> str:
        return date_format(obj.date, "D, N j, Y") + (" (today)" if obj.date == today() else "")

    @admin.display(description="Daily limit", ordering="limit_usd")
    def daily_limit(self, obj: Budget) -> str:
        return usd(obj.limit_usd)

    @admin.display(description="Spent that day")
    def spent(self, obj: Budget) -> str:
        committed = obj.used_usd + obj.reserved_usd
        share = round(committed / obj.limit_usd * 100) if obj.limit_usd else 100
        return f"{usd(committed)} ({share} %)"

    @admin.display(description="Left")
    def left(self, obj: Budget) -> str:
        return usd(max(obj.remaining_usd, Decimal(0)))

    def get_fields(self, request: HttpRequest, obj: Budget | None = None) -> Any:
        return ["date", "limit_usd", "spent"] if obj is not None else ["date", "limit_usd"]

    def get_fieldsets(self, request: HttpRequest, obj: Model | None = None) -> Any:
        # A heading over the form: the add page had none, only its two fields.
        (_name, options), *rest = super().get_fieldsets(request, obj)
        return [("Daily spending limit", options), *rest]

    def get_readonly_fields(self, request: HttpRequest, obj: Budget | None = None) -> Any:
        return ["date", "spent"] if obj is not None else []

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        return {"date": today(), **super().get_changeform_initial_data(request)}

    def add_changelist_context(self, request: HttpRequest, context: dict[str, Any]) -> None:
        agency = request_agency(request)
        if agency is not None:  # a superuser's list spans agencies: no one "today"
            context["budget_today"] = spend_today(agency=agency)


class EvaluationBudgetForm(BudgetForm):
    """The same form as a budget's (and its check that a limit is not below what the day
    spent or reserved already), for the judge's limit."""

    class Meta:
        model = EvaluationBudget
        fields = ["date", "limit_usd"]
        labels = {"date": "Starts on", "limit_usd": "Daily evaluation limit (USD)"}
        help_texts = {
            "date": "The limit applies from this day on, every day, until one starting on a "
            "later day sets another.",
            "limit_usd": "What the LLM judge of the agency's experiments may spend in one day "
            "(test cases with a rubric), apart from the daily budget of runs. A case whose judge "
            'call does not fit is not judged: its check fails, "evaluation budget exhausted".',
        }


@admin.register(EvaluationBudget)
class EvaluationBudgetAdmin(BudgetAdmin):
    """The LLM judge's daily limit (evals/judge.py): a day's row appears with the first judge
    call, at the latest earlier limit or AGENTDESK_EVALUATION_BUDGET_USD."""

    empty_state = EmptyState(
        "No evaluation budget yet",
        "An evaluation budget is a daily limit on what the LLM judge of your experiments "
        "spends (test cases with a rubric), apart from the runs' budget. Until you add one, "
        "the platform's default applies; today's row appears with the day's first judge call.",
    )
    csv_columns = [
        ("date", "date"), ("limit_usd", "limit_usd"), ("used_usd", "used_usd"),
        ("reserved_usd", "reserved_usd"),
    ]  # fmt: skip
    form = EvaluationBudgetForm
    list_before_template = "usage/admin/before_list.html"  # the CSV link, no runs' card

    def get_fieldsets(self, request: HttpRequest, obj: Model | None = None) -> Any:
        (_name, options), *rest = super(BudgetAdmin, self).get_fieldsets(request, obj)
        return [("Daily evaluation limit", options), *rest]

    def add_changelist_context(self, request: HttpRequest, context: dict[str, Any]) -> None:
        return None


@admin.register(ModelPrice)
class ModelPriceAdmin(SharedRowsAdmin):
    write_roles = ADMIN_ROLES
    list_display = [
        "provider", "model", "input_per_mtok", "output_per_mtok", "cache_read_per_mtok",
        "cache_write_per_mtok", "is_active", "platform_price",
    ]  # fmt: skip
    list_filter = ["provider", "is_active"]
    search_fields = ["model"]

    @admin.display(description="Platform price", boolean=True)
    def platform_price(self, obj: ModelPrice) -> bool:
        return obj.agency_id is None
