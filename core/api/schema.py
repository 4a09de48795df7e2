"""OpenAPI generation: every operation documents the shared error responses, and API keys are a
bearer security scheme."""

from __future__ import annotations

from typing import Any

from drf_spectacular import openapi
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import OpenApiResponse

from core.api.fields import ErrorSerializer

ERROR_DESCRIPTIONS = {
    "400": "Invalid input (field errors in `extra.fields`); nothing was written.",
    "401": "No valid credential.",
    "403": "The credential's role does not allow this.",
    "404": "No such object in your agency (another agency's object is the same 404).",
    "413": "The request body is too large.",
    "415": "The request body is not JSON.",
}
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


class AutoSchema(openapi.AutoSchema):
    def _error_codes(self) -> list[str]:
        codes = ["400", "401", "403"]
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
