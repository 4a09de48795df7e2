"""MCP servers in the admin (agency admins and staff register them; members see them) and the
allow-list of private addresses (superusers only). Imported by :mod:`tools.admin`."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html_join
from django.utils.safestring import SafeString
from unfold.widgets import UnfoldAdminTextareaWidget

from agents.admin.common import EMPTY
from core.admin_empty import EmptyState
from core.admin_scoping import AgencyScopedAdmin, ModelAdmin
from core.exceptions import ApplicationError
from tools.mcp.models import McpAllowedAddress, McpServer
from tools.mcp.services.checks import clean_headers, url_problems

HEADER_INPUTS = ("headers", "clear_headers")
_TOOL_SETTINGS = ("is_enabled", "require_approval", "rate_limit_per_minute", "rate_limit_per_hour")


def parse_header_lines(text: str) -> dict[str, str]:
    """``Name: value`` per line (blank lines ignored) to a dict; ValueError names a bad line."""
    headers: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        name, colon, value = line.partition(":")
        if not colon or not name.strip():
            raise ValueError(f"Line {number} is not 'Name: value'.")
        headers[name.strip()] = value.strip()
    return headers


class WriteOnlyTextarea(UnfoldAdminTextareaWidget):
    """Renders empty always: a form shown again after a failed submit must not echo the
    headers just typed (secrets) into the page."""

    def format_value(self, value: Any) -> str | None:
        return None


class McpServerForm(forms.ModelForm[McpServer]):
    """The headers are write-only: never rendered back, blank keeps the stored ones."""

    headers = forms.CharField(
        required=False,
        label="New headers",
        widget=WriteOnlyTextarea(attrs={"rows": 3, "autocomplete": "off"}),
        help_text="Write-only, stored encrypted: one 'Name: value' per line, e.g. "
        "'Authorization: Bearer …'. The stored values are never shown. Leave blank to keep them.",
    )
    clear_headers = forms.BooleanField(required=False, label="Remove the stored headers")

    class Meta:
        model = McpServer
        fields = ("name",)  # the admin adds the fields of its fieldsets

    def clean_url(self) -> str:
        url: str = self.cleaned_data.get("url") or ""
        problems = url_problems(url) if url else []
        if problems:
            raise forms.ValidationError(problems)
        return url

    def clean_headers(self) -> dict[str, str] | None:
        text = self.cleaned_data.get("headers") or ""
        if not text.strip():
            return None
        try:
            return clean_headers(parse_header_lines(text))
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None
        except ApplicationError as exc:
            problems = exc.extra.get("fields", {}).get("headers", [exc.message])
            raise forms.ValidationError(problems) from None

    def clean(self) -> dict[str, Any]:
        cleaned: dict[str, Any] = super().clean() or {}
        if cleaned.get("headers") and cleaned.get("clear_headers"):
            self.add_error("clear_headers", "Either enter new headers or remove the stored ones.")
        moved = {"url", "agency"} & set(self.changed_data)
        keeps = cleaned.get("headers") is None and not cleaned.get("clear_headers")
        existing = not self.instance._state.adding  # (a new row has its UUID already)
        if moved and keeps and existing and self.instance.has_headers:
            # Stored credentials go only where they were entered for.
            self.add_error(
                "headers",
                "The URL changed: enter the headers for it again, or remove the stored ones.",
            )
        if (
            "slug" in self.changed_data
            and existing
            and McpServer.objects.filter(pk=self.instance.pk, tools__isnull=False).exists()
        ):
            self.add_error(
                "slug",
                "The prefix of a server with tools cannot change (agents' patterns name them).",
            )
        return cleaned

    def apply_headers(self, server: McpServer) -> None:
        if self.cleaned_data.get("headers") is not None:
            server.set_headers(self.cleaned_data["headers"])
        elif self.cleaned_data.get("clear_headers"):
            server.set_headers({})


def _refresh(model_admin: admin.ModelAdmin[Any], request: HttpRequest, server: McpServer) -> None:
    # The MCP client (the mcp SDK, its HTTP stack) loads when a server is refreshed, not with
    # the admin: every process that starts Django imports the admin.
    from tools.mcp.services.discovery import mcp_server_refresh  # noqa: PLC0415 - heavy

    result = mcp_server_refresh(server=server)
    if not result.ok:
        model_admin.message_user(request, result.error_message, messages.WARNING)
        return
    summary = (
        f"{server.name}: {len(result.added)} tools added, {len(result.updated)} updated, "
        f"{len(result.removed)} removed."
    )
    if result.skipped:
        summary += f" Skipped: {'; '.join(result.skipped)}"
    model_admin.message_user(
        request, summary, messages.WARNING if result.skipped else messages.SUCCESS
    )


@admin.register(McpServer)
class McpServerAdmin(AgencyScopedAdmin):
    empty_state = EmptyState(
        "No MCP server yet",
        "An MCP server lends its tools to your agents. Add its URL: AgentDesk lists the tools "
        "it offers, and you give them to agents on each agent's page.",
    )
    form = McpServerForm
    list_display = [
        "name", "slug", "url", "is_enabled", "tool_count", "header_status", "last_refreshed_at",
    ]  # fmt: skip
    list_filter = ["is_enabled", "require_approval"]
    search_fields = ["name", "slug", "url"]
    readonly_fields = [
        "header_status", "tool_list", "last_refreshed_at", "last_error", "created_at",
        "updated_at",
    ]  # fmt: skip
    actions = ["refresh_tools"]
    fieldsets = [
        (None, {"fields": ["name", "slug", "url", "is_enabled", "timeout_seconds"]}),
        ("Headers", {"fields": ["header_status", *HEADER_INPUTS]}),
        (
            "Its tools",
            {
                "fields": [
                    "require_approval",
                    "rate_limit_per_minute",
                    "rate_limit_per_hour",
                    "tool_list",
                    "last_refreshed_at",
                    "last_error",
                ],
                "description": "Discovered with the MCP SDK when the server is saved, with the "
                "'Discover tools now' action, and hourly. They are named mcp_[prefix]__[tool]: "
                "agents' allowed/denied tool patterns, risk rules and approvals apply to them as "
                "to any tool (e.g. allow 'mcp_weather__*', deny 'mcp_*').",
            },
        ),
        ("History", {"fields": ["created_at", "updated_at"], "classes": ["collapse"]}),
    ]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return super().get_queryset(request).prefetch_related("tools")

    @admin.display(description="Tools")
    def tool_count(self, obj: McpServer) -> int:
        return len(obj.tools.all())

    @admin.display(description="Stored headers")
    def header_status(self, obj: McpServer | None) -> str:
        if obj is None or not obj.has_headers:
            return "none"
        return f"set: {', '.join(obj.header_names)} (values hidden)"

    @admin.display(description="Tool names")
    def tool_list(self, obj: McpServer | None) -> SafeString | str:
        if obj is None or obj.pk is None:
            return EMPTY
        names = sorted(t.name for t in obj.tools.all())
        if not names:
            return EMPTY
        return format_html_join(", ", "<code>{}</code>", ((n,) for n in names))

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        fieldsets = super().get_fieldsets(request, obj)
        can_write = (
            self.has_change_permission(request, obj)
            if obj is not None
            else self.has_add_permission(request)
        )
        if can_write:
            return fieldsets
        # The header inputs are form-only fields: a read-only page has no form to take them from.
        return [
            (name, {**opts, "fields": [f for f in opts["fields"] if f not in HEADER_INPUTS]})
            for name, opts in fieldsets
        ]

    def save_model(self, request: HttpRequest, obj: McpServer, form: Any, change: bool) -> None:
        form.apply_headers(obj)
        super().save_model(request, obj, form, change)
        if change and set(_TOOL_SETTINGS) & set(form.changed_data):
            obj.tools.update(
                is_active=obj.is_enabled,
                is_dangerous=obj.require_approval,
                rate_limit_per_minute=obj.rate_limit_per_minute,
                rate_limit_per_hour=obj.rate_limit_per_hour,
            )
        if obj.is_enabled and (not change or {"url", "headers"} & set(form.changed_data)):
            _refresh(self, request, obj)

    @admin.action(description="Discover tools now", permissions=["change"])
    def refresh_tools(self, request: HttpRequest, queryset: QuerySet[McpServer]) -> None:
        for server in queryset:
            _refresh(self, request, server)


@admin.register(McpAllowedAddress)
class McpAllowedAddressAdmin(ModelAdmin):
    """Superusers only: which non-public addresses any agency's MCP server may be at."""

    list_display = ["network", "port", "note", "created_at"]
    search_fields = ["network", "note"]

    def has_module_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_active and request.user.is_staff and request.user.is_superuser)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_module_permission(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return self.has_module_permission(request)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_module_permission(request)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_module_permission(request)
