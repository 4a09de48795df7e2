"""Runs and their traces, read-only: executions (the run page: its live view's timeline, then
its fields), steps and the trigger log. Cancelling a run is the one thing staff may do here."""

from __future__ import annotations

from typing import Any, override

from django.contrib import admin, messages
from django.db.models import Count, OuterRef, QuerySet, Subquery
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, reverse
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.html import format_html
from django.utils.safestring import SafeString

from agents.admin import panels
from agents.admin.common import (
    EMPTY,
    LINK,
    ReadOnlyInline,
    changelist_link,
    id_column,
    json_display,
    run_link,
)
from agents.admin.run_page import run_page_context
from agents.models import (
    Agent,
    DecisionPoint,
    Execution,
    ExecutionStatus,
    ExecutionStep,
    StateTransition,
    StepType,
    TriggerLog,
)
from agents.runtime import provider_limits
from agents.services import execution_cancel
from core.admin_scoping import AgencyScopedAdmin, ReadOnlyAdminMixin
from tools.models import ToolCall
from usage.templatetags.usage_format import usd

AGENT_FILTER = ("agent", admin.RelatedOnlyFieldListFilter)


class StepToolCallInline(ReadOnlyInline):
    model = ToolCall
    fk_name = "step"
    fields = ["tool_name", "status", "error_code", "duration_ms", "started_at"]
    ordering = ["created_at"]
    verbose_name_plural = "Tool calls"


@admin.register(Execution)
class ExecutionAdmin(panels.RegisteredFields, ReadOnlyAdminMixin, AgencyScopedAdmin):
    list_display = [
        "run", "agent", "status_shown", "trigger_type", "stop_reason", "tokens_total",
        "cost", "tool_call_count", "duration_ms", "created_at",
    ]  # fmt: skip
    list_display_links = ["run"]
    run = id_column("Run")
    # "Purpose": the agent's runs apart from its experiments' (evaluation runs, evals/).
    list_filter = ["status", "purpose", "trigger_type", "stop_reason", AGENT_FILTER]
    list_select_related = ["agent"]
    date_hierarchy = "created_at"
    search_fields = ["agent__name", "input", "output", "error", "trace_id"]
    actions = ["cancel"]
    # No inlines: the live view's timeline (live/templates/live/execution_live.html) is the run's
    # one list of steps and state changes, each step's details folded; the rows behind it (steps
    # with their full payloads, tool calls, state transitions, decision points) are a click away
    # through the "Related" links, filtered to the run.
    # Other apps' panels (agents/admin/panels.py): a fieldset each, after "Input".
    registries = (panels.RUN_PANELS,)
    unsaved = EMPTY

    @admin.display(description="Status", ordering="status")
    def status_shown(self, obj: Execution) -> str:
        """A run waiting in ``waiting_input`` says for what: a provider's rate limit and a
        ``wait`` timer are not questions for a human."""
        label = str(obj.get_status_display())
        failed = getattr(obj, "failed_tool_calls", 0) or 0
        if failed:  # a run may complete although tool calls failed: say so beside it
            label += f" · {failed} tool call{'s' if failed > 1 else ''} failed"
        kind = (obj.input_request or {}).get("kind")
        if obj.status != ExecutionStatus.WAITING_INPUT or obj.wait_until is None:
            return label
        until = date_format(timezone.localtime(obj.wait_until), "DATETIME_FORMAT")
        if kind == provider_limits.INPUT_REQUEST_KIND:
            limit = str(obj.input_request.get("limit", "")).replace("_", " ")
            return f"{label}: provider rate limit ({limit}) until {until}"
        if kind == "timer":
            return f"{label}: timer until {until}"
        return label

    @admin.display(description="Cost", ordering="cost_usd")
    def cost(self, obj: Execution) -> str:
        """As every page shows a cost (usage's usd): the run's page, the agent's, daily usage."""
        return usd(obj.cost_usd)

    @admin.display(description="Status")
    def run_status(self, obj: Execution | None) -> SafeString | str:
        """The status, kept by the live view as the socket reports it, like its badge
        (live/static/live/execution.js): the field as the page drew it stayed "Pending" beside
        a "Completed" badge when the page's refetch of these fields was slow or lost."""
        if obj is None:
            return EMPTY
        return format_html(
            '<span data-run-status="{}">{}</span>', obj.status, obj.get_status_display()
        )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        # A subquery, not a join: the changelist's count() leaves it out.
        failed = (
            ExecutionStep.objects.filter(
                execution_id=OuterRef("pk"), step_type=StepType.ACT, tool_output__has_key="error"
            )
            .values("execution_id")
            .annotate(n=Count("*"))
            .values("n")
        )
        return super().get_queryset(request).annotate(failed_tool_calls=Subquery(failed))

    trigger_data_pretty = json_display("trigger_data", "Trigger data")
    result_pretty = json_display("result", "Result")
    actions_taken_pretty = json_display("actions_taken", "Actions taken")
    error_details_pretty = json_display("error_details", "Error details")
    input_request_pretty = json_display("input_request", "Input request")
    config_snapshot_pretty = json_display("config_snapshot", "Configuration snapshot")
    fieldsets = [
        (
            "Run",
            {
                "fields": [
                    "id",  # the whole id, to copy (the title shows 8 characters)
                    "agent",
                    "agent_version_link",
                    "site",
                    "parent",
                    "depth",
                    "run_status",
                    "stop_reason",
                    "trigger_type",
                    "trigger_event",
                    "triggered_by",
                    "cancel_requested_at",
                    "related_links",
                ]
            },
        ),
        # (The live view above shows the instruction.)
        ("Input", {"fields": ["input", "trigger_data_pretty"], "classes": ["collapse"]}),
        (
            "Outcome",
            {
                "fields": [
                    "output",
                    "result_pretty",
                    "actions_taken_pretty",
                    "error",
                    "error_details_pretty",
                ],
                # The live view above shows the outcome, totals and timing as they change; these
                # fields are the row as it was when the page loaded.
                "classes": ["collapse"],
            },
        ),
        (
            "Usage",
            {
                "fields": [
                    "tokens_input",
                    "tokens_output",
                    "tokens_cache_read",
                    "tokens_cache_write",
                    "tokens_total",
                    "cost",  # as the header above and every other page show it
                    "llm_call_count",
                    "tool_call_count",
                ],
                "classes": ["collapse"],
            },
        ),
        (
            "Timing",
            {
                "fields": ["created_at", "started_at", "completed_at", "duration_ms"],
                "classes": ["collapse"],
            },
        ),
        (
            "Runtime",
            {
                "fields": [
                    "current_step",
                    "attempts",
                    "sequence",
                    "lease_owner",
                    "lease_expires_at",
                    "wait_until",
                    "input_request_pretty",
                    "trace_id",
                    "config_snapshot_pretty",
                ],
                "classes": ["collapse"],
            },
        ),
    ]

    @admin.display(description="Agent version")
    def agent_version_link(self, obj: Execution | None) -> SafeString | str:
        """The version the run started with and keeps to its end, and how it differs from the
        agent's configuration now."""
        if obj is None or obj.agent_version_id is None:
            return "- (started before versions were kept)" if obj and obj.started_at else EMPTY
        version = obj.agent_version
        assert version is not None
        url = reverse("admin:agents_agent_versions", args=[obj.agent_id])
        current = (
            Agent.objects.filter(pk=obj.agent_id).values_list("current_version__number", flat=True)
        ).first()
        if current is None or current == version.number:
            return format_html(LINK, url, f"Version {version.number} (current)")
        return format_html(
            LINK + " · edited since: " + LINK,
            url,
            f"Version {version.number}",
            f"{url}?a={version.number}&b={current}",
            f"diff with version {current}",
        )

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        fieldsets = list(super().get_fieldsets(request, obj))
        after = next(i for i, (title, _) in enumerate(fieldsets) if title == "Input") + 1
        added = [
            (p.title, {"fields": [p.name]})
            for p in panels.RUN_PANELS
            if p.shown is None or obj is None or p.shown(obj)
        ]
        return [*fieldsets[:after], *added, *fieldsets[after:]]

    def get_urls(self) -> list[URLPattern]:
        added = [url for entry in panels.RUN_URLS for url in entry.urls(self)]
        return [*added, *super().get_urls()]

    @admin.display(description="Related")
    def related_links(self, obj: Execution | None) -> SafeString | str:
        if obj is None:
            return EMPTY
        links = [
            changelist_link(ExecutionStep, "steps", execution__id__exact=obj.pk),
            changelist_link(ToolCall, "tool calls", execution__id__exact=obj.pk),
            changelist_link(StateTransition, "state transitions", execution__id__exact=obj.pk),
            changelist_link(DecisionPoint, "decision points", execution__id__exact=obj.pk),
            changelist_link(TriggerLog, "trigger log", execution__id__exact=obj.pk),
            *(entry.render(obj) for entry in panels.RUN_LINKS),
        ]
        return SafeString(" · ".join(links))

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        return self._can_write(request)

    @admin.action(description="Cancel selected executions", permissions=["cancel"])
    def cancel(self, request: HttpRequest, queryset: QuerySet[Execution]) -> None:
        ended = requested = finished = 0
        for execution in queryset:
            result = execution_cancel(execution=execution, reason=f"Cancelled by {request.user}.")
            if execution.is_terminal or (
                result.is_terminal and result.status != ExecutionStatus.CANCELLED
            ):
                finished += 1  # it had ended (or ended meanwhile) on its own
            elif result.is_terminal:
                ended += 1
            else:
                requested += 1  # a worker holds it: it stops before its next model call or tool
        parts = [f"Cancelled {ended} execution(s)."]
        if requested:
            parts.append(
                f"Cancel requested for {requested} running execution(s): each stops before its "
                "next model call or tool."
            )
        if finished:
            parts.append(f"{finished} had already finished and were left as they were.")
        self.message_user(request, " ".join(parts), messages.SUCCESS)

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        extra = {**(extra_context or {}), "can_cancel": self.has_cancel_permission(request)}
        return super().change_view(request, object_id, form_url, extra)

    @override
    def render_change_form(  # (Django's signature)
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Any = None,
    ) -> HttpResponse:
        if obj is not None:
            context.update(run_page_context(execution=obj, may_write=self._can_write(request)))
        return super().render_change_form(request, context, add, change, form_url, obj)


@admin.register(ExecutionStep)
class ExecutionStepAdmin(ReadOnlyAdminMixin, AgencyScopedAdmin):
    list_display = [
        "__str__", "execution_link", "step_type", "tool_name", "model", "tokens_input",
        "tokens_output", "cost_usd", "duration_ms", "created_at",
    ]  # fmt: skip
    list_filter = ["step_type", "model"]
    date_hierarchy = "created_at"
    search_fields = ["tool_name", "reasoning", "output_text", "input_text"]
    inlines = [StepToolCallInline]
    llm_response_pretty = json_display("llm_response", "LLM response")
    tool_input_pretty = json_display("tool_input", "Tool input")
    tool_output_pretty = json_display("tool_output", "Tool output")
    fields = [
        "execution", "step_number", "step_type", "input_text", "reasoning", "output_text",
        "model", "llm_response_pretty", "tool_name", "tool_call_id", "tool_input_pretty",
        "tool_output_pretty", "tokens_input", "tokens_output", "tokens_cache_read",
        "tokens_cache_write", "cost_usd", "started_at", "completed_at", "duration_ms",
    ]  # fmt: skip

    @admin.display(description="Execution", ordering="execution__created_at")
    def execution_link(self, obj: ExecutionStep) -> SafeString | str:
        return run_link(obj.execution)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return super().get_queryset(request).select_related("execution")


@admin.register(TriggerLog)
class TriggerLogAdmin(ReadOnlyAdminMixin, AgencyScopedAdmin):
    list_display = [
        "triggered_at", "agent", "trigger_type", "event_type", "outcome", "skip_reason",
        "execution_link",
    ]  # fmt: skip
    list_filter = ["outcome", "skip_reason", "trigger_type", AGENT_FILTER]
    list_select_related = ["agent", "execution"]
    date_hierarchy = "triggered_at"
    search_fields = ["event_type", "skip_detail", "agent__name"]
    payload_pretty = json_display("payload", "Payload")
    fields = [
        "triggered_at", "agent", "site", "trigger_type", "event_type", "event",
        "payload_pretty", "outcome", "skip_reason", "skip_detail", "execution",
        "budget_used_today_usd", "budget_remaining_usd",
    ]  # fmt: skip

    @admin.display(description="Execution")
    def execution_link(self, obj: TriggerLog) -> SafeString | str:
        return run_link(obj.execution) if obj.execution_id else EMPTY
