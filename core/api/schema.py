"""OpenAPI generation: every operation documents the shared error responses, a request body
that refuses unknown keys says so (``additionalProperties: false``), a decimal's pattern is the
one the server checks (core.api.strict), and API keys are a bearer security scheme."""

from __future__ import annotations

from typing import Any

from drf_spectacular import openapi
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers

from core.api.fields import ErrorSerializer, StrictSerializerMixin
from core.api.strict import decimal_pattern

ERROR_DESCRIPTIONS = {
    "400": "Invalid input (field errors in `extra.fields`); nothing was written.",
    "401": "No valid credential.",
    "403": "The credential's role does not allow this.",
    "404": "No such object in your agency (another agency's object is the same 404).",
    "413": "The request body is too large.",
    "409": "The request conflicts with the current state (a name taken, already decided...).",
    "415": "The request body is not JSON.",
    "422": "The request matches this schema but breaks a rule it cannot state (an expiry in "
    "the past, a date range too long, a reference to no object of your agency).",
    "429": "Too many requests for this credential; `Retry-After` says when to come back.",
    "500": "An unexpected error; it has been logged, and nothing of it is in the answer.",
    "503": "The database is unavailable for a moment; `Retry-After` says when to retry.",
}
# Answers any operation may give, whatever it does (the README's "Errors").
EVERY_OPERATION = ["400", "401", "403", "409", "422", "429", "500", "503"]
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


class AutoSchema(openapi.AutoSchema):
    def _error_codes(self) -> list[str]:
        codes = list(EVERY_OPERATION)
        if "{" in self.path or self.method == "GET":
            codes.append("404")  # a missing object, or a page past the end
        if self.method in BODY_METHODS:
            codes += ["413", "415"]
        return codes

    def _get_response_bodies(self, direction: Any = "response") -> dict[str, Any]:
        responses: dict[str, Any] = super()._get_response_bodies(direction)
        for code in self._error_codes():
            if code not in responses:
                responses[code] = self._get_response_for_code(
                    OpenApiResponse(ErrorSerializer, description=ERROR_DESCRIPTIONS[code]),
                    code,
                    direction=direction,
                )
        return responses

    def _map_serializer_field(
        self, field: Any, direction: Any, bypass_extensions: bool = False
    ) -> dict[str, Any]:
        schema: dict[str, Any] = super()._map_serializer_field(field, direction, bypass_extensions)
        if isinstance(field, serializers.DecimalField) and schema.get("format") == "decimal":
            schema["pattern"] = decimal_pattern(field)
        elif (
            direction == "request"
            and isinstance(field, serializers.CharField)
            and field.trim_whitespace
            and not field.allow_blank
            and schema.get("type") == "string"
            and not {"pattern", "format", "enum"} & schema.keys()
            # A RegexValidator's pattern (drf-spectacular adds it after this) says more.
            and not any(hasattr(validator, "regex") for validator in field.validators)
        ):
            # The server strips the text first: blank after that (" ") is refused, as "" is.
            schema["pattern"] = NOT_BLANK
        return schema

    def _map_basic_serializer(self, serializer: Any, direction: Any) -> dict[str, Any]:
        schema: dict[str, Any] = super()._map_basic_serializer(serializer, direction)
        if direction == "request" and isinstance(serializer, StrictSerializerMixin):
            schema["additionalProperties"] = False
        return schema


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "core.api.authentication.ApiKeyAuthentication"
    name = "agencyApiKey"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "adk_<prefix>_<secret>",
            "description": "An agency API key, created by an agency admin and shown once.",
        }


# PostgreSQL stores no NUL character: the API refuses one anywhere in a request (400, from the
# body's parser and, for the URL, core.middleware). The schema says so wherever a request has
# free text: strings without a pattern, format or choices, and free-form JSON (JSON_VALUE).
NO_NUL = r"^[^\x00]*$"
# Free text a field takes only with something in it besides whitespace (and no NUL).
NOT_BLANK = r"^[^\x00]*[^\x00\s][^\x00]*$"
JSON_VALUE = "JSONValue"


def _json_value_ref() -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{JSON_VALUE}"}


JSON_VALUE_SCHEMA = {
    "description": "Any JSON value without NUL characters.",
    "nullable": True,
    "anyOf": [
        {"type": "string", "pattern": NO_NUL},
        {"type": "number"},
        {"type": "boolean"},
        {"type": "array", "items": _json_value_ref()},
        {
            "type": "object",
            "propertyNames": {"pattern": NO_NUL},
            "additionalProperties": _json_value_ref(),
        },
    ],
}


def _forbid_nul(schema: Any) -> None:
    """Mark free text in one request schema (in place), nested values included."""
    if isinstance(schema, list):
        for item in schema:
            _forbid_nul(item)
        return
    if not isinstance(schema, dict) or "$ref" in schema:
        return
    if not schema:  # any value at all
        schema.update(_json_value_ref())
        return
    kind = schema.get("type")
    if kind == "string" and not {"pattern", "format", "enum"} & schema.keys():
        schema["pattern"] = NO_NUL
    elif kind == "object" and schema.get("additionalProperties") in (True, {}):
        schema["additionalProperties"] = _json_value_ref()
        schema["propertyNames"] = {"pattern": NO_NUL}
    elif kind == "array" and schema.get("items") in (None, {}):
        schema["items"] = _json_value_ref()
    for key in ("properties", "items", "additionalProperties", "allOf", "anyOf", "oneOf"):
        value = schema.get(key)
        if key == "properties" and isinstance(value, dict):
            _forbid_nul(list(value.values()))
        elif value is not None:
            _forbid_nul(value)


def forbid_nul_in_requests(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """drf-spectacular post-processing hook: NUL is refused in request bodies and parameters."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    for name, component in schemas.items():
        if name.endswith("Request"):  # COMPONENT_SPLIT_REQUEST: request bodies only
            _forbid_nul(component)
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                _forbid_nul(parameter.get("schema"))
            for media in operation.get("requestBody", {}).get("content", {}).values():
                _forbid_nul(media.get("schema"))
    schemas[JSON_VALUE] = JSON_VALUE_SCHEMA
    return result
