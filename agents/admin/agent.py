"""The agent page: configuration through the agent services (validation on the form, ai.agent.*
events), the effective tool list, the schedule in words, stats and links to its runs."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, path
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from agents.admin import views
from agents.admin.common import EMPTY, admin_url, changelist_link
from agents.admin.display import agent_effective_tools, schedule_summary
from agents.admin.forms import AgentForm
from agents.models import Agent, AgentGoal, Execution
from agents.services import (
    agent_activate,
    agent_create,
    agent_deactivate,
    agent_delete,
    agent_duplicate,
    agent_update,
)
from agents.services.agents import EDITABLE_FIELDS
from core.admin_scoping import AgencyScopedAdmin, ScopedInlineMixin
from tools.models import Tool

STATS_FIELDS = (
    "executions_link",
    "total_runs",
    "successful_runs",
    "failed_runs",
    "total_tokens_used",
    "total_cost_usd",
    "total_actions_taken",
    "avg_response_time_ms",
    "last_run_at",
    "last_error",
    "template",
    "created_by",
    "updated_by",
    "created_at",
    "updated_at",
)


class AgentGoalInline(ScopedInlineMixin, admin.StackedInline[AgentGoal, Agent]):
    model = AgentGoal
    extra = 0
    exclude = ["agency"]
    readonly_fields = ["achieved_at"]
    verbose_name_plural = "Goals (part of the behaviour: the system prompt lists them)"


def _copy_saved_state(target: Agent, saved: Agent) -> None:
    """Make the admin's form instance the row the service saved, so that inlines, the log entry
    and the redirect use it."""
    for field in Agent._meta.concrete_fields:
        setattr(target, field.attname, getattr(saved, field.attname))
    target._state.adding = False
    target._state.db = saved._state.db


@admin.register(Agent)
class AgentAdmin(AgencyScopedAdmin):
    form = AgentForm
    inlines = [AgentGoalInline]
    list_display = [
        "name", "site", "agent_type", "domain", "is_active", "llm_provider", "llm_model",
        "total_runs", "last_run_at",
    ]  # fmt: skip
    list_filter = ["agent_type", "domain", "is_active", "llm_provider"]
    list_select_related = ["site"]
    search_fields = ["name", "slug", "description", "domain", "system_prompt"]
    prepopulated_fields = {"slug": ["name"]}
    readonly_fields = ["effective_tools_display", "schedule_display", *STATS_FIELDS]
    actions = ["activate", "deactivate", "duplicate", "run_now"]
    fieldsets = [
        (
            "Identity",
            {
                "fields": [
                    "name",
                    "slug",
                    "site",
                    "agent_type",
                    "domain",
                    "description",
                    "avatar_url",
                    "capabilities",
                    "is_active",
                    "is_public",
                ]
            },
        ),
        ("Behaviour", {"fields": ["personality", "system_prompt", "constraints", "examples"]}),
        ("Tools", {"fields": ["allowed_tools", "denied_tools", "effective_tools_display"]}),
        ("Model", {"fields": ["llm_provider", "llm_model", "temperature", "max_tokens"]}),
        (
            "Limits",
            {
                "fields": [
                    "max_steps_per_run",
                    "max_tool_calls_per_step",
                    "timeout_seconds",
                    "max_runs_per_hour",
                    "max_runs_per_day",
                ]
            },
        ),
        (
            "Triggers",
            {
                "fields": [
                    "trigger_events",
                    "trigger_schedule",
                    "schedule_display",
                    "trigger_conditions",
                ]
            },
        ),
        ("Stats", {"fields": list(STATS_FIELDS), "classes": ["collapse"]}),
    ]

    # --- computed, read-only -----------------------------------------------------------------
    @admin.display(description="Effective tools")
    def effective_tools_display(self, obj: Agent | None) -> SafeString | str:
        if obj is None or obj.pk is None:
            return "Shown once the agent is saved."
        names, available = agent_effective_tools(obj.agency_id, obj.allowed_tools, obj.denied_tools)
        if not names:
            why = "the allowed list is empty" if not obj.allowed_tools else "no active tool matches"
            return f"None: {why}, so this agent can answer but cannot act."
        tools = Tool.objects.filter(name__in=names).order_by("name")
        items = format_html_join(
            "",
            '<li><a href="{}">{}</a>{}</li>',
            (
                (admin_url(tool), tool.name, " (needs approval)" if tool.is_dangerous else "")
                for tool in tools
            ),
        )
        return format_html(
            "{} of {} active tools (saved patterns):<ul class='effective-tools'>{}</ul>",
            len(names),
            available,
            items,
        )

    @admin.display(description="Schedule")
    def schedule_display(self, obj: Agent | None) -> str:
        if obj is None or obj.pk is None:
            return "Shown once the agent is saved."
        return schedule_summary(obj.trigger_schedule, active=obj.is_active)

    @admin.display(description="Executions")
    def executions_link(self, obj: Agent | None) -> SafeString | str:
        if obj is None or obj.pk is None:
            return EMPTY
        count = Execution.objects.filter(agent=obj).count()
        return changelist_link(Execution, f"{count} executions", agent__id__exact=obj.pk)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = list(super().get_readonly_fields(request, obj))
        # An agent never moves between agencies (its runs, memories and usage stay behind).
        return [*fields, "agency"] if obj is not None and request.user.is_superuser else fields

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        fieldsets = super().get_fieldsets(request, obj)
        return fieldsets if obj is not None else [f for f in fieldsets if f[0] != "Stats"]

    # --- saving through the services ---------------------------------------------------------
    def save_model(self, request: HttpRequest, obj: Agent, form: Any, change: bool) -> None:
        fields = {n: v for n, v in form.cleaned_data.items() if n in EDITABLE_FIELDS}
        user_id = request.user.pk
        if change:
            current = Agent.objects.get(pk=obj.pk)
            saved = agent_update(agent=current, user_id=user_id, **fields)
        else:
            site = fields.pop("site")
            saved = agent_create(agency_id=obj.agency_id, site=site, user_id=user_id, **fields)
        _copy_saved_state(obj, saved)

    def save_formset(self, request: HttpRequest, form: Any, formset: Any, change: bool) -> None:
        goals = formset.save(commit=False)
        for goal in formset.deleted_objects:
            goal.delete()
        for goal in goals:
            goal.agency_id = form.instance.agency_id  # a goal is in its agent's agency
            goal.save()
        formset.save_m2m()

    def delete_model(self, request: HttpRequest, obj: Agent) -> None:
        agent_delete(agent=obj, user_id=request.user.pk)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Agent]) -> None:
        for agent in queryset:
            agent_delete(agent=agent, user_id=request.user.pk)

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> Any:
        # An agent's runs, steps and tool calls go with it; their admins are read-only, which
        # must not make the agent itself undeletable.
        deleted, counts, _perms_needed, protected = super().get_deleted_objects(objs, request)
        return deleted, counts, set(), protected

    # --- actions -----------------------------------------------------------------------------
    def has_run_permission(self, request: HttpRequest) -> bool:
        return self.has_change_permission(request)

    @admin.action(description="Activate selected agents", permissions=["change"])
    def activate(self, request: HttpRequest, queryset: QuerySet[Agent]) -> None:
        for agent in queryset:
            agent_activate(agent=agent, user_id=request.user.pk)
        self.message_user(request, f"Activated {len(queryset)} agent(s).", messages.SUCCESS)

    @admin.action(description="Deactivate selected agents", permissions=["change"])
    def deactivate(self, request: HttpRequest, queryset: QuerySet[Agent]) -> None:
        for agent in queryset:
            agent_deactivate(agent=agent, user_id=request.user.pk)
        self.message_user(request, f"Deactivated {len(queryset)} agent(s).", messages.SUCCESS)

    @admin.action(description="Duplicate selected agents (inactive copies)", permissions=["add"])
    def duplicate(self, request: HttpRequest, queryset: QuerySet[Agent]) -> None:
        copies = [agent_duplicate(agent=agent, user_id=request.user.pk) for agent in queryset]
        names = ", ".join(copy.name for copy in copies)
        self.message_user(request, f"Created {names}.", messages.SUCCESS)

    @admin.action(description="Run selected agents now", permissions=["run"])
    def run_now(self, request: HttpRequest, queryset: QuerySet[Agent]) -> None:
        # In id order, as every transaction that starts runs of several agents must: each start
        # holds that agent's run-limit lock until the request commits (execution_create).
        for agent in queryset.order_by("pk"):
            views.start_run(self, request, agent, instruction="")

    # --- extra pages ---------------------------------------------------------------------------
    def get_urls(self) -> list[URLPattern]:
        wrap = self.admin_site.admin_view
        return [
            path(
                "from-template/",
                wrap(self.from_template_view),
                name="agents_agent_from_template",
            ),
            path("<path:object_id>/run/", wrap(self.run_view), name="agents_agent_run"),
            *super().get_urls(),
        ]

    def from_template_view(self, request: HttpRequest) -> HttpResponse:
        return views.from_template(self, request)

    def run_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        return views.run(self, request, object_id)

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        extra = {**(extra_context or {}), "can_run": self.has_run_permission(request)}
        return super().change_view(request, object_id, form_url, extra)
