"""LLM providers: the API key is write-only; the admin shows whether one is set, never the key."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from agents.admin.forms import LLMProviderForm
from agents.models import LLMProvider
from core.admin_scoping import ADMIN_ROLES, AgencyScopedAdmin

KEY_INPUTS = ("api_key", "clear_api_key")
CREDENTIALS_HELP = (
    "OpenAI, Anthropic and Google Gemini: the provider's API key (Google: a Gemini API key "
    "from AI Studio); leave the API endpoint empty to use the provider's own service. An "
    "endpoint is a gateway's base URL: for OpenAI with its /v1, for Anthropic and Google "
    "without a version (the Google SDK appends /v1beta/models/<model>:generateContent). "
    "OpenAI-compatible servers (Ollama, vLLM) need the endpoint, e.g. http://host:11434/v1, "
    "and usually no key. The organization id is OpenAI's only."
)
MODELS_HELP = (
    "The default model is the one agents of this provider use when they name none, e.g. "
    "gpt-4o-mini, claude-sonnet-4-5 or gemini-2.5-flash. Their prices (usage: model prices) "
    "make a run's cost."
)


@admin.register(LLMProvider)
class LLMProviderAdmin(AgencyScopedAdmin):
    form = LLMProviderForm
    # Whoever can change a row's endpoint decides where its stored key is sent.
    write_roles = ADMIN_ROLES
    list_display = [
        "provider_name", "site", "is_active", "is_default", "default_model", "api_key_status",
    ]  # fmt: skip
    list_filter = ["provider_name", "is_active", "is_default"]
    list_select_related = ["site"]
    search_fields = ["default_model", "api_endpoint"]
    readonly_fields = ["api_key_status", "created_at", "updated_at"]
    fieldsets = [
        (None, {"fields": ["provider_name", "site", "is_active", "is_default"]}),
        (
            "Credentials",
            {
                "fields": ["api_key_status", *KEY_INPUTS, "api_endpoint", "organization_id"],
                "description": CREDENTIALS_HELP,
            },
        ),
        (
            "Models",
            {"fields": ["available_models", "default_model"], "description": MODELS_HELP},
        ),
        (
            "Limits",
            {
                "fields": ["requests_per_minute", "tokens_per_minute"],
                "description": "Kept by every worker together, per minute: a run that "
                "reaches either limit waits (status waiting_input, without a worker) until the "
                "next minute and then goes on. Empty or 0: no limit. Each call reserves its "
                "estimated input plus the agent's max tokens, then counts what it really used. "
                "The provider's own rate limits (HTTP 429) are still retried with backoff, "
                "honouring Retry-After.",
            },
        ),
        ("History", {"fields": ["created_at", "updated_at"], "classes": ["collapse"]}),
    ]

    @admin.display(description="API key")
    def api_key_status(self, obj: LLMProvider | None) -> str:
        if obj is None or not obj.has_api_key:
            return "not set"
        return f"set (ends in …{obj.api_key_hint})" if obj.api_key_hint else "set"

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        fieldsets = super().get_fieldsets(request, obj)
        can_write = (
            self.has_change_permission(request, obj)
            if obj is not None
            else self.has_add_permission(request)
        )
        if can_write:
            return fieldsets
        # The key inputs are form-only fields: a read-only page has no form to take them from.
        return [
            (name, {**opts, "fields": [f for f in opts["fields"] if f not in KEY_INPUTS]})
            for name, opts in fieldsets
        ]

    def save_model(self, request: HttpRequest, obj: LLMProvider, form: Any, change: bool) -> None:
        form.apply_api_key(obj)
        super().save_model(request, obj, form, change)
