"""Admin for agency API keys: an agency admin creates one, sees the full key once (in the
confirmation message), and revokes it. Keys are never deleted, so their use stays traceable."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import Model, QuerySet
from django.forms import ModelForm
from django.http import HttpRequest

from core.admin_scoping import ADMIN_ROLES, AgencyScopedAdmin, has_role
from core.api_keys.models import ApiKey
from core.api_keys.services import api_key_create, api_key_revoke


@admin.register(ApiKey)
class ApiKeyAdmin(AgencyScopedAdmin):
    list_display = ["name", "prefix", "role", "created_by", "last_used_at", "revoked_at"]
    list_filter = ["role"]
    search_fields = ["name", "prefix"]
    fieldsets = [(None, {"fields": ["name", "role"]})]
    readonly_fields = ["prefix", "created_by", "created_at", "last_used_at", "revoked_at"]
    actions = ["revoke_keys"]
    write_roles = ADMIN_ROLES

    def has_module_permission(self, request: HttpRequest) -> bool:
        return super().has_module_permission(request) and has_role(request, ADMIN_ROLES)

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False  # revoke instead

    def get_fieldsets(self, request: HttpRequest, obj: Model | None = None) -> Any:
        fieldsets = super().get_fieldsets(request, obj)
        if obj is None:
            return fieldsets
        (name, options), *rest = fieldsets
        readonly = ["prefix", "created_by", "created_at", "last_used_at", "revoked_at"]
        return [(name, {**options, "fields": [*options["fields"], *readonly]}), *rest]

    def get_readonly_fields(self, request: HttpRequest, obj: Model | None = None) -> Any:
        # The role of an existing key is fixed: a new role is a new key.
        return [*self.readonly_fields, "role"] if obj is not None else self.readonly_fields

    def save_model(
        self, request: HttpRequest, obj: Any, form: ModelForm[Any], change: bool
    ) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        super_agency = obj.agency_id  # chosen by a superuser; members get theirs below
        membership = getattr(request, "membership", None)
        agency_id = membership.agency_id if membership is not None else super_agency
        key, full_key = api_key_create(
            agency_id=agency_id, name=obj.name, role=obj.role, created_by_id=request.user.pk
        )
        obj.pk, obj.prefix, obj.agency_id = key.pk, key.prefix, key.agency_id
        obj.created_at, obj.updated_at, obj.created_by_id = (
            key.created_at,
            key.updated_at,
            key.created_by_id,
        )
        obj._state.adding = False
        messages.warning(
            request,
            f"The new key is {full_key} — copy it now: it is stored hashed and will not be "
            "shown again.",
        )

    @admin.action(description="Revoke selected keys", permissions=["change"])
    def revoke_keys(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        for key in queryset:
            api_key_revoke(api_key=key)
        self.message_user(request, f"Revoked {queryset.count()} key(s).")
