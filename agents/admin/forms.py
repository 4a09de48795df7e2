"""Admin forms: agent configuration checked by the agent services' own validation (with a picker
of the registry's tools beside the tool patterns), the LLM provider's write-only API key, and the
"run now" / "try it" instruction."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms
from django.conf import settings
from unfold.forms import BaseDialogForm
from unfold.widgets import SELECT_CLASSES as PICKER_CLASSES
from unfold.widgets import (
    UnfoldAdminSelectWidget,
    UnfoldAdminTextareaWidget,
    UnfoldAdminTextInputWidget,
)

from agents.models import INPUT_MAX_CHARS, VERSIONED_FIELDS, Agent, AgentTemplate, LLMProvider
from agents.services import validate_agent_fields
from agents.services.versions import version_gate
from core.exceptions import ApplicationError
from core.models import Site

PATTERN_HELP = (
    "Comma-separated tool-name patterns. '*' matches any run of characters: 'crm_*' (every CRM "
    "tool), '*_send', 'crm_*_contact', '*' (every tool). {extra}"
)
HELP_TEXTS = {
    "allowed_tools": PATTERN_HELP.format(
        extra="An empty list allows no tools: the agent answers but cannot act."
    ),
    "denied_tools": PATTERN_HELP.format(extra="Denied patterns win over allowed ones."),
    "trigger_events": (
        "Comma-separated event types that start this agent, e.g. 'crm.contact.created, "
        "form.submitted': lower-case names joined by dots. A trailing '.*' takes every type "
        "under it: 'auth.login.*' starts on 'auth.login.failed' and 'auth.login.succeeded'."
    ),
    "trigger_schedule": (
        "A standard 5-field cron expression (minute hour day-of-month month day-of-week) in "
        f"{settings.TIME_ZONE}, e.g. '0 9 * * 1-5' for weekdays at 09:00. It runs only while "
        "the agent is active."
    ),
    "trigger_conditions": (
        "JSON conditions on the event's payload; {} starts on every event. Each key names a "
        "payload value (dots for nested ones) that must equal the given value, or one of a "
        'list of values; all must hold. E.g. {"source": "web", "contact.country": ["DE", '
        '"AT"]}. A missing key does not match. Manual and scheduled runs ignore them.'
    ),
    "constraints": (
        'JSON list of things the agent must NOT do, e.g. ["Never promise discounts"]. Empty: none.'
    ),
    "examples": (
        "JSON list of few-shot examples given to the model with the system prompt, e.g. "
        '[{"input": "New lead from Acme", "output": "Scored 80/100, e-mail drafted"}]. Empty: '
        "none."
    ),
    "capabilities": "Comma-separated capability names.",
}


class JSONListField(forms.JSONField):
    """A JSON list whose empty value is an empty box (not "[]", which reads as something
    typed), and an emptied box is the empty list again (not null, which the column refuses)."""

    empty_json: Callable[[], Any] = list

    def prepare_value(self, value: Any) -> Any:
        return "" if value == self.empty_json() else super().prepare_value(value)

    def to_python(self, value: Any) -> Any:
        return self.empty_json() if value in self.empty_values else super().to_python(value)


class JSONObjectField(JSONListField):
    """The same for a JSON object: its empty value ({}) is an empty box."""

    empty_json = dict


# The configuration's JSON lists (the model's help texts say what goes in them).
JSON_LISTS = {
    "constraints": JSONListField,
    "examples": JSONListField,
    "input_schema": JSONObjectField,
}


CHECKED_FIELDS = (
    "allowed_tools", "denied_tools", "trigger_schedule", "trigger_events", "trigger_conditions",
    "input_schema",
)  # fmt: skip


class ToolPatternsWidget(UnfoldAdminTextInputWidget):
    """The comma-separated patterns as before (the form field and its validation are unchanged),
    one line, with a picker of tool names and groups that adds to it."""

    template_name = "agents/admin/tool_patterns_widget.html"  # forms find app templates

    def __init__(self, picker: list[tuple[str, list[tuple[str, str]]]]) -> None:
        super().__init__(attrs={"autocomplete": "off", "spellcheck": "false"})
        self.picker = picker

    def get_context(self, name: str, value: Any, attrs: dict[str, Any] | None) -> dict[str, Any]:
        context: dict[str, Any] = super().get_context(name, value, attrs)
        context["widget"]["picker"] = self.picker
        context["widget"]["picker_classes"] = " ".join(PICKER_CLASSES)
        return context


def add_application_error(form: forms.BaseForm, exc: ApplicationError) -> None:
    """Put a service's field errors (``extra["fields"]``) on the form's fields."""
    fields: dict[str, list[str]] = exc.extra.get("fields") or {}
    for name, messages in fields.items():
        form.add_error(name if name in form.fields else None, list(messages))
    if not fields:
        form.add_error(None, exc.message)


class AgentConfigForm(forms.ModelForm[Any]):
    """Patterns, cron, event types and trigger conditions are checked by the same function the
    services use, so that the admin refuses exactly what the API refuses, on the field."""

    def clean(self) -> dict[str, Any]:
        cleaned: dict[str, Any] = super().clean() or {}
        try:
            validate_agent_fields({n: cleaned[n] for n in CHECKED_FIELDS if n in cleaned})
        except ApplicationError as exc:
            add_application_error(self, exc)
        return cleaned


class AgentForm(AgentConfigForm):
    class Meta:
        model = Agent
        fields = CHECKED_FIELDS  # the admin adds the fields of its fieldsets
        help_texts = HELP_TEXTS
        field_classes = JSON_LISTS

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        agent = self.instance
        changed = set(self.changed_data) & set(VERSIONED_FIELDS)
        gate = version_gate(agent) if agent.pk is not None and changed else None
        # A deploy gate that cannot run here would refuse the save (agents.services).
        if gate and (refusal := gate.refusal(agent, active=bool(cleaned.get("is_active")))):
            self.add_error(None, refusal)
        return cleaned


class AgentTemplateForm(AgentConfigForm):
    class Meta:
        model = AgentTemplate
        fields = CHECKED_FIELDS  # the admin adds the fields of its fieldsets
        field_classes = {**JSON_LISTS, "goals": JSONListField}
        help_texts = {
            **HELP_TEXTS,
            "goals": 'JSON list of goals, e.g. [{"name": "Qualify leads", "priority": 8}].',
        }


class LLMProviderForm(forms.ModelForm[LLMProvider]):
    """The key is write-only: never rendered back, blank keeps the stored one."""

    api_key = forms.CharField(
        required=False,
        label="API key",
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Write-only: the stored key is never shown. Leave blank to keep it.",
    )
    clear_api_key = forms.BooleanField(required=False, label="Remove the stored API key")

    class Meta:
        model = LLMProvider
        fields = ("provider_name",)  # the admin adds the fields of its fieldsets

    def clean(self) -> dict[str, Any]:
        cleaned: dict[str, Any] = super().clean() or {}
        if cleaned.get("api_key") and cleaned.get("clear_api_key"):
            self.add_error("clear_api_key", "Either enter a new key or remove the stored one.")
        # (The agency too: a superuser may move a row to another agency.)
        moved = {"api_endpoint", "provider_name", "agency"} & set(self.changed_data)
        keeps_key = not cleaned.get("api_key") and not cleaned.get("clear_api_key")
        if moved and keeps_key and self.instance.has_api_key:
            # A stored key goes only where it was entered for: whoever points the row at
            # another server must know the key (or remove it), or they would receive it.
            self.add_error(
                "api_key",
                "The endpoint or provider changed: enter the API key for it again, or remove "
                "the stored key.",
            )
        return cleaned

    def apply_api_key(self, provider: LLMProvider) -> None:
        """Encrypt a new key into ``provider`` (or clear it); the caller saves."""
        if self.cleaned_data.get("api_key"):
            provider.set_api_key(self.cleaned_data["api_key"])
        elif self.cleaned_data.get("clear_api_key"):
            provider.set_api_key("")


class FromTemplateForm(forms.Form):
    """Create from template: which template, on which site, optionally named."""

    template = forms.ModelChoiceField(
        queryset=AgentTemplate.objects.none(), widget=UnfoldAdminSelectWidget
    )
    site = forms.ModelChoiceField(queryset=Site.objects.none(), widget=UnfoldAdminSelectWidget)
    name = forms.CharField(
        max_length=200,
        required=False,
        help_text="Leave blank to use the template's name.",
        widget=UnfoldAdminTextInputWidget,
    )
    slug = forms.SlugField(
        max_length=100,
        required=False,
        help_text="Leave blank to derive it from the name.",
        widget=UnfoldAdminTextInputWidget,
    )


class RunForm(forms.Form):
    input = forms.CharField(
        label="Instruction",
        required=False,
        max_length=INPUT_MAX_CHARS,
        widget=UnfoldAdminTextareaWidget(attrs={"rows": 4}),
        help_text="What the agent should do on this run (optional: it works on its goals).",
    )


class TryItForm(BaseDialogForm, RunForm):
    """The "Try it" dialog on the agent page: the same instruction as "Run now"."""
