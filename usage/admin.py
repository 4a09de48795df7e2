"""Usage and cost: measurements are read-only; an agency admin sets the daily budget's limit.
Model prices: the platform's are changed by superusers, an agency's own rates by its admins."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin

from agents.admin.common import json_display
from core.admin_empty import EmptyState
from core.admin_scoping import ADMIN_ROLES, AgencyScopedAdmin, ReadOnlyAdminMixin, SharedRowsAdmin
from usage.admin_mixins import CsvExportMixin, UsageChartsMixin
from usage.models import Budget, ModelPrice, UsageDaily, UsagePeriod


@admin.register(UsageDaily)
class UsageDailyAdmin(UsageChartsMixin, ReadOnlyAdminMixin, AgencyScopedAdmin):
    # The 14-day charts and "Export CSV" above the list, of the rows it selects (admin_mixins).
    csv_columns = [
        ("date", "date"), ("site", "site__name"), ("agent", "agent__name"),
        ("agent_id", "agent_id"), ("provider", "provider"), ("model", "model"),
        ("agent_runs", "agent_runs"), ("llm_calls", "llm_calls"), ("tool_calls", "tool_calls"),
        ("tokens_input", "tokens_input"), ("tokens_output", "tokens_output"),
        ("tokens_cache_read", "tokens_cache_read"), ("tokens_cache_write", "tokens_cache_write"),
        ("cost_usd", "cost_usd"),
    ]  # fmt: skip
    list_display = [
        "date", "site", "agent", "provider", "model", "agent_runs", "llm_calls", "tool_calls",
        "tokens_input", "tokens_output", "cost_usd",
    ]  # fmt: skip
    list_filter = ["provider", "model", ("agent", admin.RelatedOnlyFieldListFilter)]
    list_select_related = ["site", "agent"]
    date_hierarchy = "date"
    search_fields = ["model"]


@admin.register(UsagePeriod)
class UsagePeriodAdmin(CsvExportMixin, ReadOnlyAdminMixin, AgencyScopedAdmin):
    csv_columns = [
        ("period_start", "period_start"), ("period_end", "period_end"), ("site", "site__name"),
        ("total_agent_runs", "total_agent_runs"), ("total_tokens_input", "total_tokens_input"),
        ("total_tokens_output", "total_tokens_output"), ("total_tool_calls", "total_tool_calls"),
        ("total_approvals", "total_approvals"), ("estimated_cost", "estimated_cost"),
        ("included_runs", "included_runs"), ("included_tokens", "included_tokens"),
        ("overage_runs", "overage_runs"), ("overage_tokens", "overage_tokens"),
    ]  # fmt: skip
    list_display = [
        "period_start", "period_end", "site", "total_agent_runs", "total_tool_calls",
        "total_approvals", "estimated_cost", "included_runs", "overage_runs", "overage_tokens",
    ]  # fmt: skip
    list_select_related = ["site"]
    date_hierarchy = "period_start"
    usage_by_provider_pretty = json_display("usage_by_provider", "Usage by provider")
    exclude = ["usage_by_provider"]
    readonly_fields = ["usage_by_provider_pretty"]


class BudgetForm(forms.ModelForm[Budget]):
    def clean_limit_usd(self) -> Any:
        limit = self.cleaned_data["limit_usd"]
        committed = self.instance.used_usd + self.instance.reserved_usd
        if limit is not None and limit < committed:
            raise forms.ValidationError(
                f"Already spent or reserved today: {committed} USD; the limit cannot be lower."
            )
        return limit


@admin.register(Budget)
class BudgetAdmin(CsvExportMixin, AgencyScopedAdmin):
    empty_state = EmptyState(
        "No budget yet",
        "Spending on model calls is not capped until a budget is set. Add one: its daily "
        "limit applies from the day it starts on, every day after it.",
    )
    csv_columns = [
        ("date", "date"), ("limit_usd", "limit_usd"), ("used_usd", "used_usd"),
        ("reserved_usd", "reserved_usd"), ("invocations_count", "invocations_count"),
        ("executions_started", "executions_started"),
        ("executions_completed", "executions_completed"),
    ]  # fmt: skip
    """The runtime keeps the counters; only the limit (and a future day's row) is set by hand."""

    form = BudgetForm
    write_roles = ADMIN_ROLES
    list_display = [
        "date", "limit_usd", "used_usd", "reserved_usd", "remaining", "executions_started",
        "executions_completed",
    ]  # fmt: skip
    date_hierarchy = "date"
    fields = [
        "date", "limit_usd", "used_usd", "reserved_usd", "invocations_count",
        "executions_started", "executions_completed",
    ]  # fmt: skip
    readonly_fields = [
        "used_usd", "reserved_usd", "invocations_count", "executions_started",
        "executions_completed",
    ]  # fmt: skip

    @admin.display(description="Remaining (USD)")
    def remaining(self, obj: Budget) -> Any:
        return obj.remaining_usd

    def get_readonly_fields(self, request: Any, obj: Budget | None = None) -> Any:
        fields = list(super().get_readonly_fields(request, obj))
        return [*fields, "date"] if obj is not None else fields


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
