"""Admin base classes that keep agency staff inside their agency.

Row-level security already filters every query by the request's agency; these classes add what the
database cannot: the agency field is set from the membership (never chosen by staff), write access
follows the membership role, and another agency's object is a 404 rather than a redirect.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import flatten_fieldsets
from django.db.models import JSONField, Model, Q, QuerySet
from django.forms import ModelForm
from django.http import Http404, HttpRequest
from unfold.admin import ModelAdmin as UnfoldModelAdmin
from unfold.admin import StackedInline as UnfoldStackedInline
from unfold.admin import TabularInline as UnfoldTabularInline

from core.models import Agency, Membership, Role

# The admin theme's classes, for every admin and inline of the project (django-unfold: its
# templates expect its widgets, actions and changelist). Unfold ships no type hints, so Django's
# class is named after it too: mypy then checks overrides against django-stubs, and at run time it
# is already in unfold's MRO, right where it is named.


class ModelAdmin(UnfoldModelAdmin, admin.ModelAdmin[Any]):
    """unfold.admin.ModelAdmin."""


class TabularInline(UnfoldTabularInline, admin.TabularInline[Any, Any]):
    """unfold.admin.TabularInline."""


class StackedInline(UnfoldStackedInline, admin.StackedInline[Any, Any]):
    """unfold.admin.StackedInline."""


def request_membership(request: HttpRequest) -> Membership | None:
    return getattr(request, "membership", None)


def request_agency(request: HttpRequest) -> Agency | None:
    membership = request_membership(request)
    return membership.agency if membership else None


def is_member(request: HttpRequest) -> bool:
    """An active staff login that is a superuser or belongs to an agency."""
    user = request.user
    return bool(
        user.is_active
        and user.is_staff
        and (user.is_superuser or request_membership(request) is not None)
    )


def has_role(request: HttpRequest, roles: frozenset[str]) -> bool:
    """Superusers have every role; everyone else has their membership's."""
    if request.user.is_superuser:
        return True
    membership = request_membership(request)
    return membership is not None and membership.role in roles


WRITE_ROLES: frozenset[str] = frozenset({Role.ADMIN, Role.STAFF})
# Members, keys, budgets and provider credentials: agency admins only.
ADMIN_ROLES: frozenset[str] = frozenset({Role.ADMIN})


def blank_json_to_default(form: ModelForm[Any]) -> None:
    """A cleared JSON field cleans to None, which a NOT NULL column refuses with a database
    error; store the column's default (``{}`` / ``[]``) instead."""
    cleaned = getattr(form, "cleaned_data", None)
    if cleaned is None:
        return
    for model_field in form._meta.model._meta.concrete_fields:
        if (
            isinstance(model_field, JSONField)
            and not model_field.null
            and model_field.has_default()
            and model_field.name in cleaned
            and cleaned[model_field.name] is None
        ):
            cleaned[model_field.name] = model_field.get_default()


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


class AgencyScopedAdmin(NotFoundIs404Mixin, ModelAdmin):
    """For models with an ``agency`` foreign key (``AgencyOwnedModel``)."""

    agency_field = "agency"
    write_roles: frozenset[str] = WRITE_ROLES

    # --- what a user may do -----------------------------------------------------------------
    def _is_member(self, request: HttpRequest) -> bool:
        return request.user.is_superuser or request_membership(request) is not None

    def has_module_permission(self, request: HttpRequest) -> bool:
        return request.user.is_active and request.user.is_staff and self._is_member(request)

    def has_view_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return self.has_module_permission(request)

    def _can_write(self, request: HttpRequest) -> bool:
        return has_role(request, self.write_roles)

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
    def get_fieldsets(self, request: HttpRequest, obj: Model | None = None) -> Any:
        # Declared fieldsets leave the agency out (staff never see it); a superuser picks it.
        fieldsets = super().get_fieldsets(request, obj)
        if not (self.fieldsets and request.user.is_superuser):
            return fieldsets
        if self.agency_field in flatten_fieldsets(fieldsets):
            return fieldsets
        (name, options), *rest = fieldsets
        fields = (self.agency_field, *options.get("fields", ()))
        return [(name, {**options, "fields": fields}), *rest]

    def get_form(
        self, request: HttpRequest, obj: Model | None = None, change: bool = False, **kwargs: Any
    ) -> Any:
        form = super().get_form(request, obj, change, **kwargs)
        agency = request_agency(request)
        field = self.agency_field

        class ScopedForm(form):  # type: ignore[valid-type,misc]
            """Sets the agency before model validation, so that unique constraints including it
            (a name per agency, say) are reported on the form instead of failing on save."""

            def _post_clean(self) -> None:
                if agency is not None:
                    setattr(self.instance, field, agency)
                blank_json_to_default(self)
                super()._post_clean()

            def _get_validation_exclusions(self) -> set[str]:
                exclude: set[str] = super()._get_validation_exclusions()
                if agency is not None:
                    exclude.discard(field)
                return exclude

        ScopedForm.__name__ = form.__name__
        return ScopedForm

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


class ReadOnlyAdminMixin:
    """History and measurements written by the runtime: viewable, never added, edited or deleted
    by hand, superusers included."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


class SharedRowsAdmin(AgencyScopedAdmin):
    """For catalogues with platform rows (``agency`` NULL: system tools, templates, prices, risk
    rules) that every agency reads: staff see their own rows and the platform's, and only
    superusers change platform rows."""

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        queryset = super(AgencyScopedAdmin, self).get_queryset(request)
        if request.user.is_superuser:
            return queryset
        agency = request_agency(request)
        if agency is None:
            return queryset.none()
        return queryset.filter(
            Q(**{self.agency_field: agency}) | Q(**{f"{self.agency_field}__isnull": True})
        )

    def is_platform_row(self, obj: Model | None) -> bool:
        return obj is not None and getattr(obj, f"{self.agency_field}_id") is None

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        if self.is_platform_row(obj) and not request.user.is_superuser:
            return False
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        if self.is_platform_row(obj) and not request.user.is_superuser:
            return False
        return super().has_delete_permission(request, obj)


class ScopedInlineMixin:
    """Inlines follow the membership role like :class:`AgencyScopedAdmin` (agency users hold no
    Django model permissions). ``read_only`` inlines show history rows and change nothing."""

    write_roles: frozenset[str] = WRITE_ROLES
    read_only = False

    def has_view_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return is_member(request)

    def _inline_can_write(self, request: HttpRequest) -> bool:
        return not self.read_only and is_member(request) and has_role(request, self.write_roles)

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return self._inline_can_write(request)

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return self._inline_can_write(request)

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return self._inline_can_write(request)
