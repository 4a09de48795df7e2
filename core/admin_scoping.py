"""Admin base classes that keep agency staff inside their agency.

Row-level security already filters every query by the request's agency; these classes add what the
database cannot: the agency field is set from the membership (never chosen by staff), write access
follows the membership role, and another agency's object is a 404 rather than a redirect.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import Model, QuerySet
from django.forms import ModelForm
from django.http import Http404, HttpRequest

from core.models import Agency, Membership, Role


def request_membership(request: HttpRequest) -> Membership | None:
    return getattr(request, "membership", None)


def request_agency(request: HttpRequest) -> Agency | None:
    membership = request_membership(request)
    return membership.agency if membership else None


class NotFoundIs404Mixin:
    """Django redirects to the index for a missing object; another agency's object must look
    exactly like a missing one, and both are a plain 404."""

    def get_object(
        self, request: HttpRequest, object_id: str, from_field: str | None = None
    ) -> Any:
        obj = super().get_object(request, object_id, from_field)  # type: ignore[misc]
        if obj is None:
            raise Http404("No such object.")
        return obj


class AgencyScopedAdmin(NotFoundIs404Mixin, admin.ModelAdmin[Any]):
    """For models with an ``agency`` foreign key (``AgencyOwnedModel``)."""

    agency_field = "agency"
    write_roles: frozenset[str] = frozenset({Role.ADMIN, Role.STAFF})

    # --- what a user may do -----------------------------------------------------------------
    def _is_member(self, request: HttpRequest) -> bool:
        return request.user.is_superuser or request_membership(request) is not None

    def has_module_permission(self, request: HttpRequest) -> bool:
        return request.user.is_active and request.user.is_staff and self._is_member(request)

    def has_view_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return self.has_module_permission(request)

    def _can_write(self, request: HttpRequest) -> bool:
        if request.user.is_superuser:
            return True
        membership = request_membership(request)
        return membership is not None and membership.role in self.write_roles

    def has_add_permission(self, request: HttpRequest) -> bool:
        return self.has_module_permission(request) and self._can_write(request)

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return self.has_module_permission(request) and self._can_write(request)

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return self.has_module_permission(request) and self._can_write(request)

    # --- which rows --------------------------------------------------------------------------
    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        queryset = super().get_queryset(request)
        agency = request_agency(request)
        if request.user.is_superuser:
            return queryset
        if agency is None:
            return queryset.none()
        return queryset.filter(**{self.agency_field: agency})

    # --- the agency field --------------------------------------------------------------------
    def get_exclude(self, request: HttpRequest, obj: Model | None = None) -> Any:
        exclude = list(super().get_exclude(request, obj) or [])
        if not request.user.is_superuser:
            exclude.append(self.agency_field)
        return exclude

    def get_list_filter(self, request: HttpRequest) -> Any:
        filters = list(super().get_list_filter(request))
        if request.user.is_superuser:
            filters.insert(0, self.agency_field)
        return filters

    def save_model(
        self, request: HttpRequest, obj: Any, form: ModelForm[Any], change: bool
    ) -> None:
        agency = request_agency(request)
        if agency is not None:
            setattr(obj, self.agency_field, agency)
        super().save_model(request, obj, form, change)

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        # Choices for other foreign keys are already limited by row-level security; say so
        # explicitly for the reader and for connections without it.
        agency = request_agency(request)
        related = db_field.related_model
        if agency is not None and related is not None and hasattr(related, "agency_id"):
            kwargs["queryset"] = related._default_manager.filter(agency=agency)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)
