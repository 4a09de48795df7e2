from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from django.contrib import admin
from django.contrib.auth.admin import UserAdmin
from django.db.models import QuerySet
from django.http import HttpRequest
from unfold.forms import AdminPasswordChangeForm, UserChangeForm, UserCreationForm

# Registered when the admin discovers this module, on the site the theme installs (unfold replaces
# admin.site in its ready(), after core's: an admin registered from core's ready() was lost).
from core import admin_api_keys, admin_events, admin_third_party  # noqa: F401
from core.admin_scoping import (
    AgencyScopedAdmin,
    ModelAdmin,
    NotFoundIs404Mixin,
    request_agency,
    request_membership,
)
from core.models import Agency, Role, Site, User
from core.selectors import agency_row_counts
from core.services import agency_delete


@admin.register(User)
class AgentDeskUserAdmin(UserAdmin[User], ModelAdmin):
    """Logins are platform-wide: only superusers manage them; agencies manage memberships."""

    # Django's forms with the theme's widgets.
    form = UserChangeForm
    add_form = UserCreationForm
    change_password_form = AdminPasswordChangeForm

    def has_module_permission(self, request: HttpRequest) -> bool:
        return request.user.is_superuser


@admin.register(Agency)
class AgencyAdmin(NotFoundIs404Mixin, ModelAdmin):
    list_display = ["name", "slug", "is_active", "created_at"]
    list_filter = ["is_active"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}
    readonly_fields = ["id", "created_at", "updated_at"]
    fieldsets = [
        (None, {"fields": ["id", "name", "slug", "is_active", "enabled_modules"]}),
        (
            "Retention",
            {
                "fields": [
                    "execution_retention_days",
                    "event_retention_days",
                    "trigger_log_retention_days",
                    "dataset_retention_days",
                ],
                "description": (
                    "Days to keep each kind of row; an hourly job deletes older ones. Empty "
                    "keeps them forever. Daily usage totals are always kept."
                ),
            },
        ),
        (
            "Memory embeddings",
            {
                "fields": ["embedding_provider", "embedding_model"],
                "description": (
                    "The model that embeds this agency's memories and episodes (the local model "
                    "works offline, with no key). After a change, run "
                    "<code>manage.py reembed_memories --agency SLUG</code>: until then, searches "
                    "only see memories embedded by the new model."
                ),
            },
        ),
        ("History", {"fields": ["created_at", "updated_at"]}),
    ]

    def has_module_permission(self, request: HttpRequest) -> bool:
        return request.user.is_superuser or request_membership(request) is not None

    def has_view_permission(self, request: HttpRequest, obj: Agency | None = None) -> bool:
        return self.has_module_permission(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return request.user.is_superuser

    def has_delete_permission(self, request: HttpRequest, obj: Agency | None = None) -> bool:
        return request.user.is_superuser

    def has_change_permission(self, request: HttpRequest, obj: Agency | None = None) -> bool:
        membership = request_membership(request)
        return request.user.is_superuser or (
            membership is not None and membership.role == Role.ADMIN
        )

    def get_deleted_objects(
        self, objs: Sequence[Agency] | QuerySet[Agency], request: HttpRequest
    ) -> tuple[list[str], dict[str, int], set[str], list[str]]:
        # An agency's rows go with it (agency_delete), so the page shows how many of each kind
        # rather than Django's list of every object: that rendered each step of every run of a
        # big agency, and asked for a delete permission on each table whose admin is read-only
        # (runs, events, usage), which refused even superusers (403).
        agencies = list(objs)
        counts: Counter[str] = Counter()
        for agency in agencies:
            for model, n in agency_row_counts(agency_id=agency.pk).items():
                counts[str(model._meta.verbose_name_plural)] += n
        counts[str(Agency._meta.verbose_name_plural)] = len(agencies)
        return [str(agency) for agency in agencies], dict(counts), set(), []

    def delete_model(self, request: HttpRequest, obj: Agency) -> None:
        agency_delete(agency=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Agency]) -> None:
        for agency in queryset:
            agency_delete(agency=agency)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Agency]:
        queryset = super().get_queryset(request)
        if request.user.is_superuser:
            return queryset
        agency = request_agency(request)
        return queryset.filter(pk=agency.pk) if agency else queryset.none()

    def get_readonly_fields(self, request: HttpRequest, obj: Agency | None = None) -> Any:
        fields = list(super().get_readonly_fields(request, obj))
        if not request.user.is_superuser:
            fields += ["slug", "is_active"]
        return fields

    def get_prepopulated_fields(
        self, request: HttpRequest, obj: Agency | None = None
    ) -> dict[str, Any]:
        # A read-only slug has no form field to prepopulate (the change page of an agency
        # admin, where the enabled modules are edited, raised KeyError 'slug').
        if not request.user.is_superuser:
            return {}
        return dict(super().get_prepopulated_fields(request, obj))


@admin.register(Site)
class SiteAdmin(AgencyScopedAdmin):
    list_display = ["name", "domain", "is_active", "created_at"]
    list_filter = ["is_active"]
    search_fields = ["name", "domain"]
    readonly_fields = ["id", "created_at", "updated_at"]


# Members (Membership) are in members/admin.py, beside invitations.
