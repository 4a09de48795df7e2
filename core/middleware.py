"""Resolves the request's tenant once, from the authenticated user's membership."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from core import tenancy
from core.selectors import membership_for_user


class TenantMiddleware:
    """Runs the rest of the request in a transaction scoped to the user's agency.

    ``request.membership`` is the user's membership (``None`` for superusers and anonymous users).
    Superusers see every agency; a user without a membership sees no agency-owned rows at all.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
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
