"""Tools: the registry is changed by superusers only (a tool is code the platform runs); agency
users see it. Tool calls are history, read-only."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest
from django.utils.safestring import SafeString

from agents.admin.common import EMPTY, json_display, link, run_link
from core.admin_scoping import AgencyScopedAdmin, ReadOnlyAdminMixin, SharedRowsAdmin
from tools.mcp import admin as _mcp_admin  # noqa: F401 - registers the MCP admins
from tools.models import Tool, ToolCall
from tools.validation import InvalidToolSchema, check_parameters_schema


class ToolForm(forms.ModelForm[Tool]):
    class Meta:
        model = Tool
        fields = ("parameters_schema",)  # the admin adds the fields of its fieldsets
        help_texts = {
            "parameters_schema": (
                'JSON Schema (Draft 2020-12) of the arguments: {"type": "object", '
                '"properties": {...}, "required": [...]}.'
            ),
            "is_dangerous": "Every call waits for a human approval before it runs.",
            "requires_permissions": (
                "Comma-separated. Each is checked like a tool name against the agent's allowed "
                "and denied tool patterns (denied wins), e.g. 'crm_write' is granted by "
                "'crm_*'. An agent lacking one is not offered the tool."
            ),
            "requires_modules": (
                "Comma-separated platform modules (e.g. crm, email, booking). The tool is "
                "offered only to agencies that enabled every one (Agency: enabled modules)."
            ),
        }

    def clean_parameters_schema(self) -> Any:
        schema = self.cleaned_data.get("parameters_schema")
        try:
            check_parameters_schema(schema)
        except InvalidToolSchema as exc:
            raise forms.ValidationError(exc.message, code="invalid_schema") from exc
        return schema


@admin.register(Tool)
class ToolAdmin(SharedRowsAdmin):
    form = ToolForm
    list_display = [
        "name", "display_name", "category", "handler_type", "is_dangerous", "is_system",
        "is_active", "rate_limit_per_minute",
    ]  # fmt: skip
    list_filter = ["category", "handler_type", "is_dangerous", "is_system", "is_active"]
    search_fields = ["name", "display_name", "description"]
    readonly_fields = ["is_system", "created_at", "updated_at"]
    fieldsets = [
        (None, {"fields": ["name", "display_name", "description", "category", "is_active"]}),
        ("Arguments and result", {"fields": ["parameters_schema", "returns_schema"]}),
        ("Handler", {"fields": ["handler_type", "handler_config"]}),
        (
            "Access and limits",
            {
                "fields": [
                    "is_dangerous",
                    "requires_permissions",
                    "requires_modules",
                    "rate_limit_per_minute",
                    "rate_limit_per_hour",
                ]
            },
        ),
        ("History", {"fields": ["is_system", "created_at", "updated_at"]}),
    ]

    def _can_write(self, request: HttpRequest) -> bool:
        return request.user.is_superuser

    def save_model(self, request: HttpRequest, obj: Tool, form: Any, change: bool) -> None:
        obj.is_system = obj.agency_id is None  # a tool without an agency is the platform's
        super().save_model(request, obj, form, change)


@admin.register(ToolCall)
class ToolCallAdmin(ReadOnlyAdminMixin, AgencyScopedAdmin):
    list_display = [
        "tool_name", "status", "agent", "execution_link", "step_link", "duration_ms",
        "created_at",
    ]  # fmt: skip
    list_filter = ["status", "tool_name", ("agent", admin.RelatedOnlyFieldListFilter)]
    list_select_related = ["agent", "execution", "step"]
    date_hierarchy = "created_at"
    search_fields = ["tool_name", "tool_call_id", "error", "error_code"]
    input_pretty = json_display("input", "Input")
    output_pretty = json_display("output", "Output")
    fields = [
        "tool_name", "tool", "status", "agent", "execution", "step", "tool_call_id",
        "idempotency_key", "input_pretty", "output_pretty", "error", "error_code",
        "started_at", "completed_at", "duration_ms", "tokens_used", "approvals_link",
    ]  # fmt: skip
    readonly_fields = ["approvals_link"]

    @admin.display(description="Execution")
    def execution_link(self, obj: ToolCall) -> SafeString | str:
        return run_link(obj.execution)

    @admin.display(description="Step")
    def step_link(self, obj: ToolCall) -> SafeString | str:
        return link(obj.step) if obj.step_id else EMPTY

    @admin.display(description="Approvals")
    def approvals_link(self, obj: ToolCall | None) -> SafeString | str:
        if obj is None:
            return EMPTY
        approvals = list(obj.approvals.all())
        return SafeString(", ".join(str(link(a)) for a in approvals)) if approvals else EMPTY
