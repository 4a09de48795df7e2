"""The form an approver edits a proposed call in, built from the tool's JSON Schema."""

from __future__ import annotations

from typing import Any, cast

from django import forms

from approvals.inbox.schema_form import ArgumentsForm, JSONTextField, LinesField, TextField

EMAIL_SEND = {
    "type": "object",
    "properties": {
        "to": {"type": "array", "items": {"type": "string"}, "description": "Recipients"},
        "subject": {"type": "string", "maxLength": 120},
        "body": {"type": "string"},
        "priority": {"type": "string", "enum": ["low", "normal", "high"]},
        "retries": {"type": "integer", "minimum": 0, "maximum": 5},
        "weight": {"type": "number"},
        "track": {"type": "boolean"},
        "reply_to": {"type": "string", "format": "email"},
        "headers": {"type": "object"},
        "attachments": {"type": "array", "items": {"type": "object"}},
    },
    "required": ["to", "subject", "body"],
}
PROPOSED = {"to": ["ann@example.com", "bob@example.com"], "subject": "Q3", "body": "Hi\nthere"}


def bound(data: dict[str, Any], schema: Any = EMAIL_SEND, proposed: Any = None) -> ArgumentsForm:
    prefixed = {f"arg-{key}": value for key, value in data.items()}
    return ArgumentsForm(schema, PROPOSED if proposed is None else proposed, prefixed, prefix="arg")


def test_each_json_type_gets_its_field() -> None:
    fields = ArgumentsForm(EMAIL_SEND, PROPOSED).fields
    assert isinstance(fields["to"], LinesField)
    assert isinstance(fields["subject"], forms.CharField)
    assert isinstance(fields["subject"].widget, forms.TextInput)  # maxLength 120: one line
    assert isinstance(fields["body"].widget, forms.Textarea)
    assert isinstance(fields["priority"], forms.TypedChoiceField)
    choices = cast(list[tuple[str, str]], fields["priority"].choices)
    assert [value for value, _ in choices] == ["", "low", "normal", "high"]
    assert isinstance(fields["retries"], forms.IntegerField)
    assert (fields["retries"].min_value, fields["retries"].max_value) == (0, 5)
    assert isinstance(fields["weight"], forms.FloatField)
    assert isinstance(fields["track"], forms.BooleanField)
    assert not fields["track"].required
    assert isinstance(fields["reply_to"], forms.EmailField)
    assert isinstance(fields["headers"], JSONTextField)
    assert isinstance(fields["attachments"], JSONTextField)
    assert [name for name, field in fields.items() if field.required] == ["to", "subject", "body"]
    assert fields["to"].help_text == "Recipients One per line."


def test_the_form_is_prefilled_with_the_proposed_call() -> None:
    form = ArgumentsForm(
        EMAIL_SEND, {**PROPOSED, "headers": {"X-Tag": "q3"}, "retries": 2}, prefix="arg"
    )
    html = form.as_div()
    assert "ann@example.com\nbob@example.com</textarea>" in html
    assert 'value="Q3"' in html
    assert "Hi\nthere</textarea>" in html
    assert "&quot;X-Tag&quot;: &quot;q3&quot;" in html
    assert 'value="2"' in html


def test_cleaned_values_become_the_tools_json_arguments() -> None:
    form = bound(
        {
            "to": "ann@example.com\n\n  carl@example.com \n",
            "subject": "Q3 offer",
            "body": "Hello",
            "priority": "high",
            "retries": "3",
            "weight": "0.5",
            "track": "on",
            "headers": '{"X-Tag": "q3"}',
            "attachments": "",
            "reply_to": "",
        }
    )
    assert form.is_valid(), form.errors
    assert form.arguments() == {
        "to": ["ann@example.com", "carl@example.com"],
        "subject": "Q3 offer",
        "body": "Hello",
        "priority": "high",
        "retries": 3,
        "weight": 0.5,
        "track": True,
        "headers": {"X-Tag": "q3"},
    }


def test_optional_fields_left_empty_are_omitted() -> None:
    form = bound({"to": "ann@example.com", "subject": "Q3", "body": "Hi"})
    assert form.is_valid(), form.errors
    assert form.arguments() == {"to": ["ann@example.com"], "subject": "Q3", "body": "Hi"}


def test_an_unchecked_optional_checkbox_is_kept_false_when_the_call_had_it() -> None:
    form = bound({"to": "a@x.io", "subject": "Q3", "body": "Hi"}, proposed={"track": True})
    assert form.is_valid(), form.errors
    assert form.arguments()["track"] is False


def test_required_fields_and_bad_values_are_refused_with_clear_errors() -> None:
    form = bound(
        {
            "to": "",
            "subject": "",
            "body": "Hi",
            "retries": "9",
            "headers": "{not json",
            "attachments": '{"a": 1}',
            "reply_to": "not an address",
        }
    )
    assert not form.is_valid()
    assert form.errors["to"] == ["This field is required."]
    assert form.errors["subject"] == ["This field is required."]
    assert "less than or equal to 5" in form.errors["retries"][0]
    assert str(form.errors["headers"][0]).startswith("Enter valid JSON (Expecting property name")
    assert form.errors["attachments"] == ["Enter a JSON list: [...]."]
    assert form.errors["reply_to"] == ["Enter a valid email address."]


def test_an_empty_json_object_is_a_value_not_a_missing_field() -> None:
    schema = {
        "type": "object",
        "properties": {"contact_id": {"type": "string"}, "updates": {"type": "object"}},
        "required": ["contact_id", "updates"],
    }
    form = bound({"contact_id": "c1", "updates": "{}"}, schema=schema, proposed={})
    assert form.is_valid(), form.errors
    assert form.arguments() == {"contact_id": "c1", "updates": {}}


def test_without_a_schema_the_fields_are_inferred_from_the_proposed_arguments() -> None:
    proposed = {"q": "renewals", "limit": 5, "exact": False, "tags": ["a", "b"], "meta": {"x": 1}}
    form = ArgumentsForm(None, proposed)
    kinds = {name: type(field) for name, field in form.fields.items()}
    assert kinds == {
        "q": TextField,
        "limit": forms.IntegerField,
        "exact": forms.BooleanField,
        "tags": LinesField,
        "meta": JSONTextField,
    }
    assert all(form.fields[name].required for name in ("q", "limit", "tags", "meta"))


def test_arguments_the_schema_does_not_name_are_kept_not_dropped() -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    form = bound({"q": "x", "extra": "kept"}, schema=schema, proposed={"q": "x", "extra": "y"})
    assert form.is_valid(), form.errors
    assert form.arguments() == {"q": "x", "extra": "kept"}
    closed = {**schema, "additionalProperties": False}
    assert "extra" not in ArgumentsForm(closed, {"q": "x", "extra": "y"}).fields


def test_the_tool_validators_errors_land_on_their_fields() -> None:
    form = bound({"to": "ann", "subject": "Q3", "body": "Hi"})
    assert form.is_valid()
    form.add_argument_errors(
        [
            {"path": "$.to[0]", "message": "'ann' is not a 'email'", "keyword": "format"},
            {"path": "$", "message": "'body' is a required property", "keyword": "required"},
            {"path": "$", "message": "Too many properties", "keyword": "maxProperties"},
            {"path": '$["x-y"]', "message": "Unknown", "keyword": "type"},
        ]
    )
    assert form.errors["to"] == ["line 1: 'ann' is not a valid e-mail address"]
    assert form.errors["body"] == ["'body' is a required property"]
    assert form.non_field_errors() == ["Too many properties", '$["x-y"]: Unknown']


def test_labels_and_help_texts_come_from_the_schema_and_are_escaped() -> None:
    schema = {
        "type": "object",
        "properties": {"q": {"type": "string", "title": "<b>Query</b>", "description": "<i>"}},
    }
    html = ArgumentsForm(schema, {}).as_div()
    assert "&lt;b&gt;Query&lt;/b&gt;" in html
    assert "<b>" not in html
    assert "<i>" not in html


def test_an_untitled_argument_is_labelled_with_its_name_in_words() -> None:
    schema = {
        "type": "object",
        "properties": {
            "template_id": {"type": "string"},
            "contact_ids": {"type": "array", "items": {"type": "string"}},
            "startTime": {"type": "string"},
            "q": {"type": "string", "title": "Query"},
        },
    }
    form = ArgumentsForm(schema, {"page_url": "https://example.com"})
    labels = {name: field.label for name, field in form.fields.items()}
    assert labels == {
        "template_id": "Template ID",
        "contact_ids": "Contact IDs",
        "startTime": "Start time",
        "q": "Query",
        "page_url": "Page URL",  # an argument the schema does not name
    }


def test_line_breaks_a_browser_sends_as_crlf_come_back_as_the_model_wrote_them() -> None:
    form = bound({"to": "a@x.io\r\nb@x.io", "subject": "Q3", "body": "Hi\r\n\r\n  there\r\n"})
    assert form.is_valid(), form.errors
    assert form.arguments()["body"] == "Hi\n\n  there\n"
    assert form.arguments()["to"] == ["a@x.io", "b@x.io"]
