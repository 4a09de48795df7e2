"""Request middleware: the tenant resolved once (from the authenticated user's membership),
``/healthz`` before anything needs the database, query strings PostgreSQL cannot store refused
with a 400, and every error under ``/api/`` in the API's JSON error shape."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from http import HTTPStatus

from django.core.signals import got_request_exception
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse

from core import database, tenancy
from core.api.exceptions import (
    RETRY_AFTER_SECONDS,
    UNAVAILABLE_CODE,
    UNAVAILABLE_MESSAGE,
    error_body,
)
from core.selectors import membership_for_user
from core.views import HEALTH_PATH, LIVENESS_PATH, healthz, livez

logger = logging.getLogger(__name__)


def database_unavailable(request: HttpRequest) -> HttpResponse:
    """503 for a request the database could not serve (an outage): the API's JSON error shape,
    a short page otherwise; never Django's 500 or debug page. Rendered without the database."""
    if request.path.startswith("/api/"):
        response: HttpResponse = JsonResponse(
            error_body(UNAVAILABLE_CODE, UNAVAILABLE_MESSAGE), status=503
        )
    else:
        response = HttpResponse(
            "<!doctype html><title>Unavailable</title><h1>AgentDesk is unavailable</h1>"
            f"<p>{UNAVAILABLE_MESSAGE} Runs in progress are not lost: they go on when the "
            "database is back.</p>",
            status=503,
        )
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


API_PREFIX = "/api/"

# The API's codes for the statuses Django itself answers with (DRF's names for the same).
_CODES = {
    400: "bad_request",
    401: "not_authenticated",
    403: "permission_denied",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    500: "server_error",
    503: "unavailable",
}
_MESSAGES = {
    404: "No such API endpoint.",
    500: "An unexpected error occurred; it has been logged.",
}
# Headers of the replaced response that still mean something to the client.
_KEPT_HEADERS = ("Retry-After", "Allow", "WWW-Authenticate", "Vary")


def api_error_response(status: int, message: str | None = None) -> JsonResponse:
    """The API's error shape for ``status``, built without the database or DRF."""
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "Error"
    code = _CODES.get(status, phrase.lower().replace(" ", "_").replace("-", "_"))
    text = message or _MESSAGES.get(status, f"{phrase}.")
    return JsonResponse(error_body(code, text), status=status)


class ApiErrorMiddleware:
    """Every error under ``/api/`` is the API's JSON error shape with its status.

    DRF renders its own errors; this catches what answers before or around it: an exception in
    a middleware or in a view outside DRF (Django's 500, or its debug page with DEBUG=True), a
    404 or 400 from Django itself. First in MIDDLEWARE: Django has already turned any exception
    further in into an HTML response (and logged it) by the time it gets here.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (
            response.status_code < 400
            or not request.path.startswith(API_PREFIX)
            or "json" in response.get("Content-Type", "")
        ):
            return response
        unhandled = getattr(request, UNHANDLED_ATTR, None)
        if unhandled is not None and database.is_transient(unhandled):
            return database_unavailable(request)  # an outage, not a bug: 503, retry later
        replaced = api_error_response(response.status_code)
        for header in _KEPT_HEADERS:
            if header in response:
                replaced[header] = response[header]
        return replaced


UNHANDLED_ATTR = "_agentdesk_unhandled_exception"


@receiver(got_request_exception, dispatch_uid="core.middleware.remember_unhandled")
def _remember_unhandled(
    sender: object, request: HttpRequest | None = None, **kwargs: object
) -> None:
    """Django turns an exception into a 500 (and logs it) before the outer middleware sees it:
    keep the exception on the request, so :class:`ApiErrorMiddleware` can tell an outage."""
    if request is not None:
        setattr(request, UNHANDLED_ATTR, sys.exc_info()[1])


NUL_MESSAGE = "Null characters are not allowed."  # Django's own validator's words


def _nul_fields(request: HttpRequest) -> dict[str, list[str]] | None:
    """Where the URL has a NUL: ``{parameter: [message]}`` (``non_field_errors`` for the path
    or a parameter's name); None when it has none."""
    if "\x00" in request.path:
        return {"non_field_errors": [f"The path: {NUL_MESSAGE}"]}
    for key, values in request.GET.lists():
        if "\x00" in key:
            return {"non_field_errors": [f"A query parameter's name: {NUL_MESSAGE}"]}
        if any("\x00" in value for value in values):
            return {key: [NUL_MESSAGE]}
    return None


class RejectNulMiddleware:
    """A NUL character in the path or the query string is a 400, before any view sees it.

    PostgreSQL cannot store or compare text with NUL (psycopg refuses it), so such a value in an
    admin list filter, a search box or an API filter reached the query and failed as a 500. No
    legitimate URL has one: the request is refused here, once for every page (under ``/api/``
    as a field error of the API's error shape, naming the parameter).
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        fields = _nul_fields(request)
        if fields is None:
            return self.get_response(request)
        (where, (problem,)), *_ = fields.items()
        if request.path.startswith(API_PREFIX):
            label = "" if where == "non_field_errors" else f"{where}: "
            body = error_body("invalid", f"Invalid input. {label}{problem}", {"fields": fields})
            return JsonResponse(body, status=400)
        return HttpResponseBadRequest(
            f"Bad request: the URL contains a NUL character. {problem}", content_type="text/plain"
        )


class HealthCheckMiddleware:
    """``/healthz`` answered first: no session, user or tenant transaction, which would need
    the database the probe is there to report on (and would wait for the pool's timeout).
    ``/livez`` likewise, and it needs nothing at all."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path == HEALTH_PATH:
            return healthz(request)
        if request.path == LIVENESS_PATH:
            return livez(request)
        return self.get_response(request)


class TenantMiddleware:
    """Runs the rest of the request in a transaction scoped to the user's agency.

    ``request.membership`` is the user's membership (``None`` for superusers and anonymous users).
    Superusers see every agency; a user without a membership sees no agency-owned rows at all.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        try:
            return self._scoped(request)
        except Exception as exc:  # opening the tenant transaction, or the user's session
            if database.is_transient(exc):
                database.refused_for_outage(exc, "request")
                return database_unavailable(request)
            raise

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        """A view that lost the database answers 503, not a 500 (or the debug page)."""
        if database.is_transient(exception):
            database.refused_for_outage(exception, "request")
            return database_unavailable(request)
        return None

    def _scoped(self, request: HttpRequest) -> HttpResponse:
        user = request.user
        request.membership = None  # type: ignore[attr-defined]
        if not user.is_authenticated:
            with tenancy.tenant_context():
                return self.get_response(request)
        if user.is_superuser:
            with tenancy.platform_context():
                return self.get_response(request)
        # The membership row is agency-owned; a SELECT-only policy lets a user read their own.
        # Its agency row is read only once that agency is the tenant.
        with tenancy.tenant_context(user_id=user.pk):
            membership = membership_for_user(user=user)
        if membership is None:
            with tenancy.tenant_context():
                return self.get_response(request)
        with tenancy.agency_context(membership.agency_id):
            if not membership.agency.is_active:
                with tenancy.tenant_context():
                    return self.get_response(request)
            request.membership = membership  # type: ignore[attr-defined]
            return self.get_response(request)
