"""Resolves the request's tenant once, from the authenticated user's membership."""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse

from core import database, tenancy
from core.api.exceptions import (
    RETRY_AFTER_SECONDS,
    UNAVAILABLE_CODE,
    UNAVAILABLE_MESSAGE,
    error_body,
)
from core.selectors import membership_for_user
from core.views import HEALTH_PATH, healthz

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


class HealthCheckMiddleware:
    """``/healthz`` answered first: no session, user or tenant transaction, which would need
    the database the probe is there to report on (and would wait for the pool's timeout)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path == HEALTH_PATH:
            return healthz(request)
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
