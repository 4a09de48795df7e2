"""The form fields the arguments form needs beyond Django's own: any JSON value typed as text,
a list typed one item per line, and a string kept as sent."""

from __future__ import annotations

import json
from typing import Any

from django import forms


class JSONTextField(forms.CharField):
    """Any JSON value typed as text; ``expect`` ("object" / "array") checks its shape."""

    widget = forms.Textarea

    def __init__(self, *, expect: str | None = None, **kwargs: Any) -> None:
        self.expect = expect
        kwargs.setdefault("strip", True)
        super().__init__(**kwargs)
        self.widget.attrs["rows"] = 6
        self.widget.attrs["class"] = "inbox-json"
        self.widget.attrs["spellcheck"] = "false"

    def as_text(self, value: Any) -> str:
        return json.dumps(value, indent=2, ensure_ascii=False)

    def validate(self, value: Any) -> None:
        # {} and [] are values here, not "empty": only a blank field is missing.
        if value is None and self.required:
            raise forms.ValidationError(self.error_messages["required"], code="required")

    def to_python(self, value: Any) -> Any:
        text = super().to_python(value)
        if not text:
            return None
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(
                "Enter valid JSON (%(problem)s at line %(line)s, column %(column)s).",
                code="invalid_json",
                params={"problem": exc.msg, "line": exc.lineno, "column": exc.colno},
            ) from exc
        if self.expect == "object" and not isinstance(parsed, dict):
            raise forms.ValidationError('Enter a JSON object: {"key": "value"}.', code="not_object")
        if self.expect == "array" and not isinstance(parsed, list):
            raise forms.ValidationError("Enter a JSON list: [...].", code="not_array")
        return parsed


class LinesField(forms.CharField):
    """A list of strings or numbers, one per line (blank lines ignored)."""

    widget = forms.Textarea

    def __init__(self, *, item_type: str = "string", **kwargs: Any) -> None:
        self.item_type = item_type
        super().__init__(**kwargs)
        self.widget.attrs["rows"] = 4

    def as_text(self, value: Any) -> str:
        if isinstance(value, list | tuple):
            return "\n".join(str(item) for item in value)
        return str(value)

    def to_python(self, value: Any) -> list[Any] | None:  # type: ignore[override]
        text = super().to_python(value)
        lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
        if not lines:
            return None
        if self.item_type == "string":
            return lines
        convert = int if self.item_type == "integer" else float
        try:
            return [convert(line) for line in lines]
        except ValueError as exc:
            noun = "whole number" if self.item_type == "integer" else "number"
            raise forms.ValidationError(
                "Each line must be a %(noun)s.", code="invalid_item", params={"noun": noun}
            ) from exc


class TextField(forms.CharField):
    """A string argument. Whitespace is the model's to choose (an e-mail body's indentation)
    and kept as sent, except the CR that browsers add to every line break of a textarea."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(strip=False, **kwargs)

    def to_python(self, value: Any) -> str | None:
        text = super().to_python(value)
        return text.replace("\r\n", "\n") if isinstance(text, str) else text
