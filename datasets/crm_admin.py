"""Registering a CRM query as a dataset in the admin (Analysis datasets -> "Register a CRM
query"), checked exactly as ``POST /api/v1/analysis/datasets/crm-query/`` checks it: the API's
serializer, then ``data_query``'s allow-list (datasets.crm_source); each fault is an error on
the field it concerns and nothing is saved. The schema is inferred on save by the service."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from unfold.widgets import (
    UnfoldAdminSelectWidget,
    UnfoldAdminTextareaWidget,
    UnfoldAdminTextInputWidget,
)

from core.exceptions import ApplicationError
from datasets import crm_source
from datasets.api.serializers import CrmQuerySerializer, as_data_query
from datasets.models import Dataset
from tools.builtin._entities import ALL_OPERATORS, ENTITIES

SOURCE_PARAMETER = "source"  # ?source=crm_query on the add page
CRM_FIELDS = ["name", "title", "description", "entity_type", "filters", "crm_fields"]
_FILTER_HELP = (
    "One filter per line, all must hold: <code>field operator value</code>, e.g. "
    "<code>status eq customer</code>, <code>created_at gte 2030-01-01</code>, "
    '<code>status in ["lead", "customer"]</code>, <code>email isnull true</code>. Operators: '
    + ", ".join(ALL_OPERATORS)
    + ". A value is read as JSON when it is JSON (numbers, true, null, lists), else as text."
)


def _fields_help() -> str:
    lines = (f"{name}: {', '.join(entity.fields)}" for name, entity in sorted(ENTITIES.items()))
    return "Comma-separated; empty keeps every field. Fields by entity — " + "; ".join(lines)


class CrmQueryDatasetForm(forms.ModelForm[Dataset]):
    entity_type = forms.ChoiceField(
        choices=[(name, name) for name in sorted(ENTITIES)],
        widget=UnfoldAdminSelectWidget,
        help_text="The CRM entities the dataset's rows are (as data_query reads them).",
    )
    filters = forms.CharField(
        required=False,
        widget=UnfoldAdminTextareaWidget(attrs={"rows": 4}),
        help_text=_FILTER_HELP,
    )
    crm_fields = forms.CharField(
        label="Fields", required=False, widget=UnfoldAdminTextInputWidget, help_text=_fields_help()
    )

    class Meta:
        model = Dataset
        fields = ["name", "title", "description"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.query: dict[str, Any] = {}
        self.filter_lines: list[int] = []  # each parsed filter's line in the text

    def _filters(self) -> list[dict[str, Any]]:
        parsed: list[dict[str, Any]] = []
        for number, line in enumerate(str(self.data.get("filters") or "").splitlines(), 1):
            if not line.strip():
                continue
            parts = line.split(None, 2)
            if len(parts) < 2:  # a field and an operator at least
                raise ValidationError({"filters": f"Line {number}: write 'field operator value'."})
            text = parts[2].strip() if len(parts) > 2 else ""
            try:
                value = json.loads(text) if text else None
            except ValueError:
                value = text
            parsed.append({"field": parts[0], "op": parts[1], "value": value})
            self.filter_lines.append(number)
        return parsed

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        query: dict[str, Any] = {
            "entity_type": self.data.get("entity_type", ""),
            "filters": self._filters(),
        }
        fields = [f.strip() for f in str(self.data.get("crm_fields") or "").split(",") if f.strip()]
        if fields:
            query["fields"] = fields
        payload = {
            "name": self.data.get("name", ""),
            "query": query,
            "title": self.data.get("title", ""),
            "description": self.data.get("description", ""),
        }
        body = CrmQuerySerializer(data=payload)
        if not body.is_valid():
            raise ValidationError(_form_errors(body.errors, self.filter_lines))
        try:
            self.query = crm_source.validate_query(as_data_query(body.validated_data["query"]))
        except ApplicationError as error:
            where = "crm_fields" if error.message.startswith("query.fields") else "filters"
            if "entity_type" in error.message:
                where = "entity_type"
            raise ValidationError({where: error.message.removeprefix("query: ")}) from error
        return data


def _form_errors(errors: Any, lines: list[int]) -> dict[str, list[str]]:
    """The serializer's errors on the form's fields (a filter's by its line)."""
    found: dict[str, list[str]] = {}

    def add(field: str, messages: Any) -> None:
        found.setdefault(field, []).extend(_flat(messages))

    for key, value in errors.items():
        if key != "query":
            add(key if key in CRM_FIELDS else "__all__", value)
            continue
        for part, messages in value.items():
            if part == "filters" and isinstance(messages, list | dict):
                # Per filter: a list, or by index (DRF's ListSerializer gives either).
                items = messages.items() if isinstance(messages, dict) else enumerate(messages)
                for index, item in items:
                    if item and isinstance(index, int) and index < len(lines):
                        add("filters", [f"Line {lines[index]}: {m}" for m in _flat(item)])
                    elif item:
                        add("filters", _flat(item))
            elif part == "fields":
                add("crm_fields", messages)
            else:
                add(part if part in CRM_FIELDS else "filters", messages)
    return found


def _flat(messages: Any) -> list[str]:
    if isinstance(messages, dict):
        return [f"{k}: {m}" for k, v in messages.items() for m in _flat(v)]
    if isinstance(messages, list):
        return [m for item in messages for m in _flat(item)]
    return [str(messages)]
