"""Display helpers shared by the admins of every app: links between related rows, JSON shown
readably, read-only inlines."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from django.contrib import admin
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.forms import SimpleArrayField
from django.db.models import JSONField, Model
from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString
from unfold.widgets import UnfoldAdminExpandableTextareaWidget, UnfoldAdminTextInputWidget

from core.admin_labels import LINK
from core.admin_scoping import ScopedInlineMixin, TabularInline

EMPTY = "-"


class CommaListField(SimpleArrayField):
    """A list typed as comma-separated names, shown as people write one ("a, b", not "a,b");
    each item is stripped as it is read, so both forms save the same list."""

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, list):
            return ", ".join(str(self.base_field.prepare_value(item)) for item in value)
        return value


# Agent configuration: a comma-separated list is one line, a JSON value as tall as it is (the
# theme's defaults are a large text box for both).
COMPACT_WIDGETS: dict[Any, dict[str, Any]] = {
    ArrayField: {"widget": UnfoldAdminTextInputWidget, "form_class": CommaListField},
    JSONField: {"widget": UnfoldAdminExpandableTextareaWidget},
}


def admin_url(obj: Model, action: str = "change") -> str:
    opts = obj._meta
    return reverse(f"admin:{opts.app_label}_{opts.model_name}_{action}", args=[obj.pk])


def link(obj: Model | None, text: object = None) -> SafeString:
    """A link to ``obj``'s change page (its view page for read-only admins); the text alone,
    escaped all the same, when the model has no admin page: callers mark the result safe."""
    if obj is None:
        return format_html("{}", EMPTY)
    label = text if text is not None else obj
    try:
        url = admin_url(obj)
    except NoReverseMatch:  # not registered in the admin
        return format_html("{}", label)
    return format_html(LINK, url, label)


def run_link(execution: Any) -> SafeString | str:
    """An execution in a list: its short id and status (its whole name wraps over lines)."""
    if execution is None:
        return EMPTY
    return link(execution, f"{short_id(execution)} · {execution.get_status_display()}")


def changelist_url(model: type[Model], **filters: object) -> str:
    opts = model._meta
    url = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
    return f"{url}?{urlencode({k: str(v) for k, v in filters.items()})}" if filters else url


def changelist_link(model: type[Model], text: object, **filters: object) -> SafeString:
    return format_html(LINK, changelist_url(model, **filters), text)


def pretty_json(value: Any) -> SafeString | str:
    """JSON indented in a <pre> block (Django shows a JSONField as one long line)."""
    if value in (None, {}, []):
        return EMPTY
    text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)
    return format_html('<pre style="white-space: pre-wrap; margin: 0">{}</pre>', text)


def short_id(obj: Model) -> str:
    return str(obj.pk)[:8]


def id_column(description: str, ordering: str = "created_at") -> Any:
    """A list column showing the row's id cut to 8 characters, the whole id on hover (a full
    UUID wraps over several lines of a narrow column). Use as a class attribute."""

    @admin.display(description=description, ordering=ordering)
    def show(self: Any, obj: Model) -> SafeString:
        return format_html(
            '<span title="{}" style="font-family: ui-monospace, monospace">{}</span>',
            obj.pk,
            short_id(obj),
        )

    return show


class ReadOnlyInline(ScopedInlineMixin, TabularInline):
    """History rows under their parent: shown, never added, edited or deleted."""

    read_only = True
    extra = 0
    can_delete = False
    show_change_link = True

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return self.fields or [f.name for f in self.model._meta.fields]


def json_display(field: str, description: str | None = None) -> Any:
    """A read-only column/field showing JSON ``field`` indented (use as a class attribute)."""

    @admin.display(description=description or field.replace("_", " "))
    def show(self: Any, obj: Model | None) -> SafeString | str:
        return pretty_json(getattr(obj, field, None)) if obj is not None else EMPTY

    return show
