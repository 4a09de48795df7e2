"""The one API error shape, ``{"message", "code", "extra"}``, from one DRF exception handler.

``ApplicationError`` keeps its status and code (``extra`` carries e.g. ``fields``); DRF validation
errors are 400 with ``extra.fields`` (422 when the body matched the schema and only broke a rule
it cannot state); not found 404; permission 403; missing credentials 401;
anything unexpected is logged and becomes a 500 that says nothing about the internals.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response

from core import database
from core.exceptions import ApplicationError

logger = logging.getLogger("agentdesk.api")


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The request body is too large."
    default_code = "payload_too_large"


UNAVAILABLE_CODE = "database_unavailable"
UNAVAILABLE_MESSAGE = "The database is unavailable right now; try again in a few seconds."
RETRY_AFTER_SECONDS = 5
THROTTLED_MESSAGE = "Too many requests; try again in {seconds} s."


def error_body(code: str, message: str, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    return {"message": message, "code": code, "extra": dict(extra or {})}


def _first_message(fields: Any, path: str = "") -> str | None:
    """``"name: This field is required."`` for the first error in a (nested) error structure."""
    if isinstance(fields, Mapping):
        for key, value in fields.items():
            label = f"{path}.{key}" if path else str(key)
            found = _first_message(value, label)
            if found:
                return found
    elif isinstance(fields, list):
        for value in fields:
            found = _first_message(value, path)
            if found:
                return found
    elif fields is not None:
        return f"{path}: {fields}" if path else str(fields)
    return None


# Field errors that are about the request's meaning, not its shape: a reference to no row of the
# agency, or a rule the schema cannot state (raised with ``code=RULE``). A request whose errors are
# all of these matched the schema: 422, not 400 (the README's "Errors").
RULE = "rule"
RULE_CODES = frozenset({RULE, "does_not_exist"})


def _leaf_codes(codes: Any) -> set[str]:
    if isinstance(codes, Mapping):
        return set().union(*(_leaf_codes(value) for value in codes.values()))
    if isinstance(codes, list):
        return set().union(*(_leaf_codes(value) for value in codes))
    return {str(codes)}


def _validation_response(exc: exceptions.ValidationError) -> Response:
    detail = exc.detail
    fields = detail if isinstance(detail, Mapping) else {"non_field_errors": detail}
    first = _first_message(fields)
    message = f"Invalid input. {first}" if first else "Invalid input."
    codes = _leaf_codes(exc.get_codes())
    status_code = 422 if codes and codes <= RULE_CODES else 400
    return Response(error_body("invalid", message, {"fields": fields}), status=status_code)


def _api_exception_response(exc: exceptions.APIException) -> Response:
    headers: dict[str, str] = {}
    auth_header = getattr(exc, "auth_header", None)
    if auth_header:
        headers["WWW-Authenticate"] = str(auth_header)
    extra: dict[str, Any] = {}
    wait = getattr(exc, "wait", None)
    if wait is not None:
        # Whole seconds, rounded up: a client that waits this long is let through.
        seconds = max(1, math.ceil(wait))
        headers["Retry-After"] = str(seconds)
        extra["retry_after"] = seconds
    codes = exc.get_codes()
    code = codes if isinstance(codes, str) else exc.default_code
    message = str(exc.detail)
    if isinstance(exc, exceptions.Throttled):
        message = THROTTLED_MESSAGE.format(seconds=extra.get("retry_after", 1))
    return Response(error_body(str(code), message, extra), status=exc.status_code, headers=headers)


def exception_handler(exc: Exception, context: Mapping[str, Any]) -> Response:
    if isinstance(exc, ApplicationError):
        return Response(error_body(exc.code, exc.message, exc.extra), status=exc.status)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound("Not found.")
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()
    elif isinstance(exc, RequestDataTooBig):
        exc = PayloadTooLarge()
    if isinstance(exc, exceptions.ValidationError):
        return _validation_response(exc)
    if isinstance(exc, exceptions.APIException):
        return _api_exception_response(exc)
    if database.is_transient(exc):  # an outage, not a bug: the client may retry
        database.refused_for_outage(exc, "API request")
        return Response(
            error_body(UNAVAILABLE_CODE, UNAVAILABLE_MESSAGE),
            status=status.HTTP_503_SERVICE_UNAVAILABLE,
            headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
        )
    view = context.get("view")
    logger.error("Unhandled error in %s", type(view).__name__ if view else "API view", exc_info=exc)
    return Response(
        error_body("server_error", "An unexpected error occurred; it has been logged."),
        status=status.HTTP_500_INTERNAL_SERVER_ERROR,
    )
