"""The agent page: configuration through the agent services (validation on the form, ai.agent.*
events, a version per configuration change) in tabs, the tools its patterns allow (live while
they are typed), the schedule in words, today's budget, its memory, stats, links to its runs and
versions, and a "Try it" run."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import Count, OuterRef, QuerySet, Subquery, TextField
from django.db.models.functions import Coalesce
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString
from unfold.decorators import action
from unfold.enums import ActionVariant
from unfold.widgets import UnfoldAdminExpandableTextareaWidget

from agents.admin import panels, versions, views
from agents.admin.agent_panels import (
    budget_panel,
    render_tool_preview,
    runs_panel,
    tool_picker_options,
)
from agents.admin.agent_tabs import FIELDSETS, STATS, STATS_FIELDS
from agents.admin.common import COMPACT_WIDGETS, EMPTY
from agents.admin.display import awaiting_gate, schedule_summary
from agents.admin.forms import AgentForm, ToolPatternsWidget, TryItForm
from agents.models import Agent, AgentGoal, AgentVersion, Execution, ExecutionPurpose
from agents.services import (
    agent_activate,
    agent_create,
    agent_deactivate,
    agent_delete,
    agent_duplicate,
    agent_update,
)
from agents.services.agents import EDITABLE_FIELDS
from agents.services.versions import held_version
from core.admin_scoping import AgencyScopedAdmin, ScopedInlineMixin, StackedInline, request_agency

PATTERN_FIELDS = ("allowed_tools", "denied_tools")
PREVIEW_FIELDS = (*PATTERN_FIELDS, "constraints")  # what the tool preview is computed from
NOT_SAVED = "Shown once the agent is saved."


class AgentGoalInline(ScopedInlineMixin, StackedInline):
    """Part of the behaviour: the system prompt lists them. A tab beside the settings."""

    model = AgentGoal
    extra = 0
    exclude = ["agency"]
    readonly_fields = ["achieved_at"]
    # A tab of the editor, beside the prompt (admin/agents/agent/change_form.html draws it in
    # the settings' row: unfold would draw an inline tab in a second row above them).
    verbose_name = "goal"  # "Add another goal"
    verbose_name_plural = "Goals"
    formfield_overrides = {TextField: {"widget": UnfoldAdminExpandableTextareaWidget}}


def _copy_saved_state(target: Agent, saved: Agent) -> None:
    """Make the admin's form instance the row the service saved, so that inlines, the log entry
    and the redirect use it."""
    for field in Agent._meta.concrete_fields:
        setattr(target, field.attname, getattr(saved, field.attname))
    target._state.adding = False
    target._state.db = saved._state.db


@admin.register(Agent)
class AgentAdmin(panels.RegisteredFields, AgencyScopedAdmin):
    form = AgentForm
    formfield_overrides = COMPACT_WIDGETS
    inlines = [AgentGoalInline]
    list_display = [
        "name", "site", "agent_type", "domain", "is_active", "provider", "llm",
        "runs", "last_run_at",
    ]  # fmt: skip
    list_filter = ["agent_type", "domain", "is_active", "llm_provider"]
    list_select_related = ["site"]
    search_fields = ["name", "slug", "description", "domain", "system_prompt"]
    prepopulated_fields = {"slug": ["name"]}
    readonly_fields = [
        "effective_tools_display", "schedule_display", "budget_display", *STATS_FIELDS,
    ]  # fmt: skip
    actions = ["activate", "deactivate", "duplicate", "run_now"]
    actions_detail = ["try_it"]
    fieldsets = FIELDSETS
    # Other apps' panels (agents/admin/panels.py), each above the agent field it explains.
    registries = (panels.AGENT_PANELS,)
    unsaved = NOT_SAVED

    class Media:
        css = {"all": ["agents/admin/agent_editor.css"]}
        js = ["agents/admin/tool_patterns.js"]

    # --- computed, read-only -----------------------------------------------------------------
    @admin.display(description="LLM provider", ordering="llm_provider")
    def provider(self, obj: Agent) -> str:
        return str(obj.get_llm_provider_display())

    @admin.display(description="Model", ordering="llm_model")
    def llm(self, obj: Agent) -> str:
        return obj.llm_model

    @admin.display(description="Runs", ordering="run_count")
    def runs(self, obj: Agent) -> int:
        """Its runs, counted as its page and the executions list count them (the agent's
        total_runs counts only those that ended completed or failed; neither counts its
        experiments' evaluation runs)."""
        return int(getattr(obj, "run_count", 0))

    def get_queryset(self, request: HttpRequest) -> QuerySet[Agent]:
        runs = (
            Execution.objects.filter(agent=OuterRef("pk"), purpose=ExecutionPurpose.RUN)
            .order_by()
            .values("agent")
            .annotate(runs=Count("id"))
            .values("runs")
        )
        return super().get_queryset(request).annotate(run_count=Coalesce(Subquery(runs), 0))

    @admin.display(description="Tools allowed")
    def effective_tools_display(self, obj: Agent | None) -> SafeString | str:
        """The saved patterns' tools, replaced (htmx, agents_agent_tool_preview) by those of the
        patterns as they are typed or picked."""
        url = reverse("admin:agents_agent_tool_preview")
        fields = ", ".join(f"#id_{name}" for name in (*PREVIEW_FIELDS, "agency"))
        typed = ", ".join(f"input changed delay:300ms from:#id_{name}" for name in PREVIEW_FIELDS)
        if obj is None or obj.pk is None:
            # Nothing saved: the preview of the form's initial patterns, once the page is loaded.
            return format_html(
                '<div id="tool-preview" hx-get="{}" hx-trigger="load, {}" hx-include="{}">{}</div>',
                url, typed, fields, "…",
            )  # fmt: skip
        saved = render_tool_preview(
            obj.agency_id,
            allowed=obj.allowed_tools,
            denied=obj.denied_tools,
            constraints=obj.constraints or [],
            basis="saved patterns",
        )
        return format_html(
            '<div id="tool-preview" hx-get="{}?agency={}" hx-trigger="{}" hx-include="{}">{}'
            "</div>",
            url, obj.agency_id, typed, fields, saved,
        )  # fmt: skip

    @admin.display(description="Schedule")
    def schedule_display(self, obj: Agent | None) -> str:
        if obj is None or obj.pk is None:
            return NOT_SAVED
        return schedule_summary(obj.trigger_schedule, active=obj.is_active)

    @admin.display(description="Budget")
    def budget_display(self, obj: Agent | None) -> SafeString | str:
        return budget_panel(obj) if obj is not None and obj.pk is not None else NOT_SAVED

    @admin.display(description="Runs")
    def executions_link(self, obj: Agent | None) -> SafeString | str:
        return runs_panel(obj) if obj is not None and obj.pk is not None else EMPTY

    @admin.display(description="Version")
    def version_link(self, obj: Agent | None) -> SafeString | str:
        if obj is None or obj.pk is None:
            return EMPTY
        count = AgentVersion.objects.filter(agent_id=obj.pk).count()
        current = obj.current_version.number if obj.current_version else None
        text = f"Version {current} of {count}" if current else f"{count} versions"
        return format_html(
            '<a href="{}" class="text-primary-600 dark:text-primary-500">{}</a>',
            versions.versions_url(obj),
            text,
        )

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = [*super().get_readonly_fields(request, obj), *panels.AGENT_PANELS.names()]
        # An agent never moves between agencies (its runs, memories and usage stay behind).
        return [*fields, "agency"] if obj is not None and request.user.is_superuser else fields

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        fieldsets = panels.with_panels(super().get_fieldsets(request, obj))
        return fieldsets if obj is not None else [f for f in fieldsets if f[0] != STATS]

    def formfield_for_dbfield(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name in PATTERN_FIELDS:
            agency = request_agency(request)
            agency_id = agency.pk if agency is not None else None
            kwargs["widget"] = ToolPatternsWidget(tool_picker_options(agency_id))
        return super().formfield_for_dbfield(db_field, request, **kwargs)

    # --- saving through the services ---------------------------------------------------------
    def save_model(self, request: HttpRequest, obj: Agent, form: Any, change: bool) -> None:
        fields = {n: v for n, v in form.cleaned_data.items() if n in EDITABLE_FIELDS}
        user_id = request.user.pk
        if change:
            current = Agent.objects.select_related("current_version").get(pk=obj.pk)
            held_before = held_version(current)
            saved = agent_update(agent=current, user_id=user_id, **fields)
            held = held_version(saved)
            if held is not None and (held_before is None or held.pk != held_before.pk):
                self.message_user(request, awaiting_gate(held, saved), messages.WARNING)
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
    def has_run_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return views.may_run(self, request)

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
            path("tool-preview/", wrap(self.tool_preview_view), name="agents_agent_tool_preview"),
            path("<path:object_id>/run/", wrap(self.run_view), name="agents_agent_run"),
            # Ahead of unfold's own URL of the "Try it" dialog (named agents_agent_try_it).
            path("<path:object_id>/try_it/", wrap(self.try_it_opened_view)),
            path(
                "<path:object_id>/versions/",
                wrap(self.versions_view),
                name="agents_agent_versions",
            ),
            path(
                "<path:object_id>/versions/<str:number>/restore/",
                wrap(self.restore_version_view),
                name="agents_agent_restore_version",
            ),
            *super().get_urls(),
        ]

    def from_template_view(self, request: HttpRequest) -> HttpResponse:
        return views.from_template(self, request)

    def run_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        return views.run(self, request, object_id)

    def try_it_opened_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        return views.try_it_opened(self, request, object_id)

    def tool_preview_view(self, request: HttpRequest) -> HttpResponse:
        return views.tool_preview(self, request)

    def versions_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        return versions.versions(self, request, object_id)

    def restore_version_view(
        self, request: HttpRequest, object_id: str, number: str
    ) -> HttpResponse:
        return versions.restore(self, request, object_id, number)

    @action(
        description="Try it",
        icon="play_arrow",
        variant=ActionVariant.PRIMARY,
        permissions=["run"],
        dialog={
            "title": "Try this agent",
            "description": "Starts a manual run now and opens it, so you can watch it work.",
            "form_class": TryItForm,
            "form_submit_text": "Start the run",
        },
    )
    def try_it(self, request: HttpRequest, form: TryItForm, object_id: str) -> HttpResponse:
        return views.try_it(self, request, object_id, instruction=form.cleaned_data["input"])

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        extra = {**(extra_context or {}), "can_run": self.has_run_permission(request)}
        return super().change_view(request, object_id, form_url, extra)
