"""Base API views: every handler runs inside the tenant of the authenticated principal.

DRF authenticates inside the view, after :class:`core.middleware.TenantMiddleware` has opened the
request's transaction (with no tenant for token and API-key logins, which it cannot see). So the
view resolves the principal right after authentication and runs the handler in a savepoint
scoped to it: an error inside the handler rolls back everything the handler wrote, and the error
response is rendered outside of it.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from django.db.models import Model, QuerySet
from django.http import Http404, HttpResponseBase
from rest_framework import viewsets
from rest_framework.request import Request
from rest_framework.views import APIView

from core.api.fields import StrictSerializer
from core.api.filtering import refuse_repeated_params
from core.api.permissions import ALL_ROLES, WRITE_ROLES
from core.api.principal import ANONYMOUS, Principal, principal_context, principal_for
from core.selectors import access_object


def parse_id(value: str) -> uuid.UUID:
    """A path id; a malformed one is the same 404 as a missing one."""
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise Http404("No such object.") from None


class TenantScopedView(APIView):
    principal: Principal = ANONYMOUS
    read_roles: frozenset[str] = ALL_ROLES
    write_roles: frozenset[str] = WRITE_ROLES
    action_roles: dict[str, frozenset[str]] = {}

    def perform_authentication(self, request: Request) -> None:
        request.user  # noqa: B018 - authenticates
        self.principal = principal_for(request)

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        refuse_repeated_params(request, self)

    def dispatch(self, request: Any, *args: Any, **kwargs: Any) -> HttpResponseBase:
        # APIView.dispatch, with the handler inside the principal's tenant context.
        self.args = args
        self.kwargs = kwargs
        request = self.initialize_request(request, *args, **kwargs)
        self.request = request
        self.headers = self.default_response_headers
        try:
            self.initial(request, *args, **kwargs)
            method = (request.method or "").lower()
            if method in self.http_method_names:
                handler = getattr(self, method, self.http_method_not_allowed)
            else:
                handler = self.http_method_not_allowed
            with principal_context(self.principal):
                response = handler(request, *args, **kwargs)
        except Exception as exc:
            response = self.handle_exception(exc)
        self.response = self.finalize_response(request, response, *args, **kwargs)
        return self.response

    def expect_no_body(self, request: Request) -> None:
        """Actions without a body still refuse one (a typo'd field must not pass silently), and
        anything but an empty object: ``null`` or ``[]`` is a 400 here as in every other action."""
        if not isinstance(request.data, Mapping) or request.data:
            StrictSerializer(data=request.data).is_valid(raise_exception=True)

    def scope[M: Model](self, queryset: QuerySet[M]) -> QuerySet[M]:
        """The principal's agency only (row-level security says the same; this keeps the code
        correct on its own). Superusers without ``?agency=`` see every agency."""
        if self.principal.agency_id is not None:
            return queryset.filter(agency_id=self.principal.agency_id)
        return queryset if self.principal.is_superuser else queryset.none()


class TenantViewSet(TenantScopedView, viewsets.GenericViewSet):
    # Ids are UUIDs, but any path segment reaches the view so that a malformed id is a JSON 404.
    lookup_value_regex = "[^/]+"

    def get_object(self) -> Any:
        lookup = self.lookup_url_kwarg or self.lookup_field
        obj = access_object(self.get_queryset(), agency=None, id=parse_id(self.kwargs[lookup]))
        self.check_object_permissions(self.request, obj)
        return obj
