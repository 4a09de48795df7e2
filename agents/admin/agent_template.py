"""Agent templates: the five platform templates (view-only below superusers) and an agency's own."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from agents.admin.common import COMPACT_WIDGETS, EMPTY
from agents.admin.forms import AgentTemplateForm
from agents.models import AgentTemplate
from core.admin_labels import titled
from core.admin_scoping import SharedRowsAdmin, request_agency


def from_template_url(template: AgentTemplate) -> str:
    return f"{reverse('admin:agents_agent_from_template')}?template={template.pk}"


@admin.register(AgentTemplate)
class AgentTemplateAdmin(SharedRowsAdmin):
    form = AgentTemplateForm
    formfield_overrides = COMPACT_WIDGETS
    # (agents/models/agent.py names these fields "is system" and "llm model")
    list_display = ["name", "slug", "agent_type", "domain", "built_in", "llm"]
    list_filter = ["agent_type", ("is_system", titled("built-in")), "domain"]
    search_fields = ["name", "slug", "description", "domain"]
    prepopulated_fields = {"slug": ["name"]}
    readonly_fields = ["is_system", "create_agent_link", "created_at", "updated_at"]
    actions = ["create_agent"]
    fieldsets = [
        (
            "Identity",
            {
                "fields": [
                    "name",
                    "slug",
                    "agent_type",
                    "domain",
                    "description",
                    "avatar_url",
                    "capabilities",
                    "is_system",
                    "create_agent_link",
                ]
            },
        ),
        (
            "Behaviour",
            {"fields": ["personality", "system_prompt", "goals", "constraints", "examples"]},
        ),
        ("Tools", {"fields": ["allowed_tools", "denied_tools"]}),
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
            "People in the loop",
            {
                "fields": [
                    "human_timeout_minutes",
                    "max_corrections",
                    "deny_may_continue",
                    "understanding_enabled",
                    "understanding_threshold",
                ]
            },
        ),
        (
            "Triggers & inputs",
            {
                "fields": [
                    "trigger_events",
                    "trigger_schedule",
                    "trigger_conditions",
                    "input_schema",
                ]
            },
        ),
        (
            "Memory",
            {
                "fields": [
                    "memory_token_budget",
                    "memory_extraction_enabled",
                    "context_token_budget",
                    "conversation_window",
                    "conversation_ttl_hours",
                ]
            },
        ),
        (
            "More",
            {"fields": ["extra_config", "created_at", "updated_at"], "classes": ["collapse"]},
        ),
    ]

    @admin.display(description="Built-in", boolean=True, ordering="is_system")
    def built_in(self, obj: AgentTemplate) -> bool:
        return obj.is_system

    @admin.display(description="LLM model", ordering="llm_model")
    def llm(self, obj: AgentTemplate) -> str:
        return obj.llm_model

    @admin.display(description="New agent")
    def create_agent_link(self, obj: AgentTemplate | None) -> SafeString | str:
        if obj is None or obj.pk is None:
            return EMPTY
        return format_html(
            '<a href="{}">Create an agent from this template</a>', from_template_url(obj)
        )

    def save_model(self, request: HttpRequest, obj: AgentTemplate, form: Any, change: bool) -> None:
        agency = request_agency(request)
        if agency is not None:
            obj.agency = agency
        obj.is_system = obj.agency_id is None  # a template without an agency is the platform's
        super().save_model(request, obj, form, change)

    def has_create_agent_permission(self, request: HttpRequest) -> bool:
        return self._can_write(request)

    @admin.action(
        description="Create an agent from the selected template", permissions=["create_agent"]
    )
    def create_agent(
        self, request: HttpRequest, queryset: QuerySet[AgentTemplate]
    ) -> HttpResponse | None:
        if len(queryset) != 1:
            self.message_user(request, "Select exactly one template.", messages.WARNING)
            return None
        return HttpResponseRedirect(from_template_url(queryset[0]))
