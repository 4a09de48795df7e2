"""The admin's test case form: a case written by hand (its dataset chosen) or edited, its JSON
indented on several lines, and checked by the services' own rules (evals.services.datasets
.validate_case) before anything is written, each fault shown on its field. Saving goes through
the services: adding or changing a case makes a new version of its dataset."""

from __future__ import annotations

import json
import re
from typing import Any

from django import forms
from django.db.models import QuerySet
from unfold.widgets import UnfoldAdminSelectWidget, UnfoldAdminTextareaWidget

from core.exceptions import ApplicationError
from evals.models import Dataset, TestCase
from evals.services.datasets import CaseData, validate_case

CASE_FIELDS = [
    "name", "input", "trigger_type", "trigger_payload", "conversation", "recorded_calls",
    "expectations",
]  # fmt: skip
JSON_FIELDS = ("trigger_payload", "conversation", "recorded_calls", "expectations")
_WHERE = re.compile(r"^case\.(\w+)")


class IndentedJSONField(forms.JSONField):
    """JSON shown indented, one key or item a line (Django's is one long line)."""

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, str) or value is None:  # as typed (an invalid input too)
            return value
        return json.dumps(value, indent=2, ensure_ascii=False, cls=self.encoder)


class TestCaseForm(forms.ModelForm[TestCase]):
    """``datasets``: the ones a case may be added to (set per request by the admin)."""

    __test__ = False  # not a pytest class, whatever its name
    datasets: QuerySet[Dataset] = Dataset.objects.none()

    dataset = forms.ModelChoiceField(
        queryset=Dataset.objects.none(),
        widget=UnfoldAdminSelectWidget,
        help_text="The case is added to its current version, which makes a new version.",
    )

    class Meta:
        model = TestCase
        fields = CASE_FIELDS
        field_classes = dict.fromkeys(JSON_FIELDS, IndentedJSONField)
        widgets = {"recorded_calls": UnfoldAdminTextareaWidget(attrs={"rows": 24})}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not self.instance._state.adding:  # an edit stays in its dataset
            del self.fields["dataset"]
        else:
            field = self.fields["dataset"]
            assert isinstance(field, forms.ModelChoiceField)
            field.queryset = self.datasets

    def case(self) -> CaseData:
        """The case as the services take it (the form's own fields, the dataset left out)."""
        return {name: self.cleaned_data[name] for name in CASE_FIELDS}  # type: ignore[return-value]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if self.errors or any(name not in cleaned for name in CASE_FIELDS):
            return cleaned
        for name in JSON_FIELDS:
            if cleaned[name] is None:  # a cleared box: the field's empty value
                cleaned[name] = {} if name in ("trigger_payload", "expectations") else []
        try:
            validate_case(self.case())
        except ApplicationError as exc:
            where = _WHERE.match(exc.message)
            field = where.group(1) if where and where.group(1) in self.fields else None
            self.add_error(field, exc.message)
        return cleaned


def expectations_summary(expectations: dict[str, Any]) -> str:
    """What a case expects, in a line: "calls crm_*; never email_*; ends completed"."""
    parts: list[str] = []
    if must := expectations.get("must_call"):
        parts.append("calls " + ", ".join(must))
    if never := expectations.get("must_not_call"):
        parts.append("never " + ", ".join(never))
    if arguments := expectations.get("arguments"):
        parts.append(f"{len(arguments)} argument match" + ("es" if len(arguments) > 1 else ""))
    if contains := expectations.get("output_contains"):
        parts.append("answer contains " + ", ".join(f"“{text}”" for text in contains))
    if "output_regex" in expectations:
        parts.append("answer matches a pattern")
    if "output_schema" in expectations:
        parts.append("answer fits a JSON schema")
    if "max_steps" in expectations:
        parts.append(f"at most {expectations['max_steps']} steps")
    if "max_cost_usd" in expectations:
        parts.append(f"at most ${expectations['max_cost_usd']}")
    if status := expectations.get("final_status"):
        parts.append(f"ends {status.replace('_', ' ')}")
    if expectations.get("judge_rubric"):
        parts.append("a judge's rubric")
    return "; ".join(parts) or "nothing yet"
