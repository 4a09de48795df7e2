"""Tool parameter schemas (Draft 2020-12, object at the top) and model-friendly argument errors."""

from __future__ import annotations

from typing import Any

import pytest

from tools import validation
from tools.validation import (
    ArgumentError,
    InvalidToolSchema,
    check_parameters_schema,
    describe_argument_errors,
    validate_arguments,
    validator_for,
)

# Seed 004's crm_get_contact and crm_search_contacts parameter schemas, verbatim.
GET_CONTACT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "contact_id": {"type": "string", "description": "Contact UUID"},
        "email": {"type": "string", "format": "email", "description": "Contact email"},
    },
    "oneOf": [{"required": ["contact_id"]}, {"required": ["email"]}],
}
SEARCH_CONTACTS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "Search query"},
        "tags": {"type": "array", "items": {"type": "string"}, "description": "Filter by tags"},
        "status": {
            "type": "string",
            "enum": ["active", "inactive", "lead", "customer"],
            "description": "Filter by status",
        },
        "limit": {"type": "integer", "default": 10, "maximum": 100},
    },
    "required": ["query"],
}


@pytest.mark.parametrize(
    "schema",
    [
        GET_CONTACT,
        SEARCH_CONTACTS,
        {"type": "object"},
        {"type": "object", "properties": {}, "additionalProperties": False},
        {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {"when": {"type": "string", "format": "date-time"}},
            "properties": {"start": {"$ref": "#/$defs/when"}},
        },
        # A "$ref" key inside enum/const is data, not a reference.
        {"type": "object", "properties": {"x": {"enum": [{"$ref": "https://example.com/"}]}}},
    ],
)
def test_check_parameters_schema_accepts_valid_object_schemas(schema: dict[str, Any]) -> None:
    check_parameters_schema(schema)


@pytest.mark.parametrize(
    ("schema", "path", "fragment"),
    [
        ([], "$", "must be a JSON object, not list"),
        ("object", "$", "must be a JSON object, not str"),
        ({"type": "objekt"}, "$.type", "not valid JSON Schema (Draft 2020-12)"),
        (
            {"type": "object", "properties": {"limit": {"type": "integer", "maximum": "100"}}},
            "$.properties.limit.maximum",
            "'100' is not of type 'number'",
        ),
        ({"type": "object", "required": "query"}, "$.required", "is not of type 'array'"),
        ({"type": "string"}, "$.type", '"type": "object"'),
        ({"properties": {"a": {"type": "string"}}}, "$.type", '"type": "object"'),
        (
            {"type": "object", "$schema": "http://json-schema.org/draft-07/schema#"},
            "$.$schema",
            "only JSON Schema Draft 2020-12",
        ),
        (
            {"type": "object", "properties": {"a": {"$ref": "https://example.com/s.json"}}},
            '$.properties.a["$ref"]',
            "only references inside the schema",
        ),
        (
            {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}},
            '$.properties.a["$ref"]',
            "does not exist",
        ),
        ({"type": "object", "minProperties": float("nan")}, "$", "not plain JSON"),
    ],
)
def test_check_parameters_schema_rejects_with_path_and_message(
    schema: Any, path: str, fragment: str
) -> None:
    with pytest.raises(InvalidToolSchema) as excinfo:
        check_parameters_schema(schema)
    assert isinstance(excinfo.value, ValueError)
    assert excinfo.value.path == path
    assert fragment in str(excinfo.value)


def test_valid_arguments_give_no_errors() -> None:
    assert validate_arguments(SEARCH_CONTACTS, {"query": "acme", "tags": ["vip"], "limit": 5}) == []
    assert validate_arguments(GET_CONTACT, {"email": "ann@example.com"}) == []


def test_errors_have_model_friendly_paths_and_keywords() -> None:
    errors = validate_arguments(
        SEARCH_CONTACTS, {"tags": ["vip", 7], "status": "gold", "limit": 1000}
    )
    assert [(e.path, e.keyword) for e in errors] == [
        ("$", "required"),
        ("$.limit", "maximum"),
        ("$.status", "enum"),
        ("$.tags[1]", "type"),
    ]
    assert errors[0].message == "'query' is a required property"
    assert errors[3].message == "7 is not of type 'string'"


def test_one_of_failure_lists_the_alternatives() -> None:
    (error,) = validate_arguments(GET_CONTACT, {})
    assert error.keyword == "oneOf"
    assert error.path == "$"
    assert error.message == (
        "must match exactly one of these alternatives: 'contact_id' is a required property; "
        "'email' is a required property"
    )


def test_format_is_checked() -> None:
    (error,) = validate_arguments(GET_CONTACT, {"email": "not-an-email"})
    assert (error.path, error.keyword) == ("$.email", "format")


def test_non_object_arguments_are_an_error_not_an_exception() -> None:
    (error,) = validate_arguments(SEARCH_CONTACTS, ["query"])
    assert (error.path, error.keyword) == ("$", "type")


def test_odd_property_names_are_quoted_in_paths() -> None:
    schema = {"type": "object", "properties": {"first name": {"type": "string"}}}
    (error,) = validate_arguments(schema, {"first name": 1})
    assert error.path == '$["first name"]'


def test_huge_offending_values_are_truncated_in_messages() -> None:
    (error,) = validate_arguments(SEARCH_CONTACTS, {"query": "x" * 10_000, "limit": "y" * 10_000})
    assert len(error.message) <= validation.MAX_MESSAGE_CHARS
    assert error.message.endswith("...")


def test_error_count_is_capped() -> None:
    schema = {"type": "object", "additionalProperties": {"type": "integer"}}
    errors = validate_arguments(schema, {f"k{i}": "s" for i in range(100)})
    assert len(errors) == validation.MAX_ERRORS


def test_broken_ref_in_an_unchecked_schema_is_reported_not_raised() -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}
    (error,) = validate_arguments(schema, {"a": 1})
    assert error.keyword == "$ref"
    assert "cannot be validated" in error.message


def test_validators_are_cached_per_schema_content() -> None:
    first = validator_for(SEARCH_CONTACTS)
    equal_copy = {key: SEARCH_CONTACTS[key] for key in reversed(SEARCH_CONTACTS)}
    assert validator_for(equal_copy) is first
    changed = {**SEARCH_CONTACTS, "required": ["query", "limit"]}
    assert validator_for(changed) is not first
    assert validate_arguments(changed, {"query": "q"})[0].message == (
        "'limit' is a required property"
    )


def test_describe_argument_errors_and_to_dict() -> None:
    errors = [
        ArgumentError(path="$", message="'query' is a required property", keyword="required"),
        ArgumentError(
            path="$.limit", message="1000 is greater than the maximum of 100", keyword="maximum"
        ),
    ]
    assert describe_argument_errors("crm_search_contacts", errors) == (
        "Invalid arguments for tool 'crm_search_contacts':\n"
        "- $: 'query' is a required property\n"
        "- $.limit: 1000 is greater than the maximum of 100"
    )
    assert errors[1].to_dict() == {
        "path": "$.limit",
        "message": "1000 is greater than the maximum of 100",
        "keyword": "maximum",
    }
