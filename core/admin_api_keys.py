"""Admin for agency API keys: an agency admin creates one (optionally expiring), sees the full
key once (in the confirmation message), and revokes it. Keys are never deleted, so their use
stays traceable. The list shows each key's state (active, expiring soon, expired, revoked) and
filters on it; ``manage.py api_keys`` does the same from a shell."""

from __future__ import annotations

import datetime
import math
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import Model, Q, QuerySet
from django.forms import ModelForm
from django.http import HttpRequest
from django.utils import timezone
from unfold.decorators import display

from core.admin_empty import EmptyState
from core.admin_scoping import ADMIN_ROLES, AgencyScopedAdmin, has_role
from core.api_keys.services import api_key_create, api_key_revoke
from core.models.api_keys import EXPIRY_WARNING_DAYS, ApiKey

ACTIVE, EXPIRING, EXPIRED, REVOKED, NEVER = "active", "expiring", "expired", "revoked", "never"


def key_state(key: ApiKey, now: datetime.datetime) -> str:
    if key.is_revoked:
        return REVOKED
    if key.expires_at is None:
        return ACTIVE
    if key.expires_at <= now:
        return EXPIRED
    if key.expires_at <= now + datetime.timedelta(days=EXPIRY_WARNING_DAYS):
        return EXPIRING
    return ACTIVE


class KeyStateFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [
            (ACTIVE, "Usable"),
            (EXPIRING, f"Expiring within {EXPIRY_WARNING_DAYS} days"),
            (EXPIRED, "Expired"),
            (REVOKED, "Revoked"),
            (NEVER, "Never expires"),
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        now = timezone.now()
        soon = now + datetime.timedelta(days=EXPIRY_WARNING_DAYS)
        live = queryset.filter(revoked_at__isnull=True)
        value = self.value()
        if value == ACTIVE:
            return live.filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
        if value == EXPIRING:
            return live.filter(expires_at__gt=now, expires_at__lte=soon)
        if value == EXPIRED:
            return live.filter(expires_at__lte=now)
        if value == REVOKED:
            return queryset.filter(revoked_at__isnull=False)
        if value == NEVER:
            return live.filter(expires_at__isnull=True)
        return queryset


class ApiKeyForm(forms.ModelForm[ApiKey]):
    def clean_expires_at(self) -> datetime.datetime | None:
        value: datetime.datetime | None = self.cleaned_data.get("expires_at")
        if value is not None and value <= timezone.now():
            raise forms.ValidationError("An expiry must be in the future.")
        return value


@admin.register(ApiKey)
class ApiKeyAdmin(AgencyScopedAdmin):
    empty_state = EmptyState(
        "No API key yet",
        "An API key lets a program (a CRM sync, a script) use the REST API and the live "
        "updates as this agency, with the rights of the role it is given. Add one: its secret "
        "is shown once, then only its prefix is listed here.",
    )
    form = ApiKeyForm
    list_display = [
        "name", "state", "prefix", "role", "expires_at", "last_used_at", "created_by",
        "revoked_at",
    ]  # fmt: skip
    list_filter = [KeyStateFilter, "role"]
    search_fields = ["name", "prefix"]
    fieldsets = [(None, {"fields": ["name", "role", "expires_at"]})]
    readonly_fields = ["prefix", "created_by", "created_at", "last_used_at", "revoked_at"]
    actions = ["revoke_keys"]
    write_roles = ADMIN_ROLES

    def has_module_permission(self, request: HttpRequest) -> bool:
        return super().has_module_permission(request) and has_role(request, ADMIN_ROLES)

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False  # revoke instead

    @display(
        description="State",
        label={
            ACTIVE: "success",
            EXPIRING: "warning",
            EXPIRED: "danger",
            REVOKED: "danger",
        },
    )
    def state(self, obj: ApiKey) -> tuple[str, str]:
        state = key_state(obj, timezone.now())
        if state == EXPIRING and obj.expires_at is not None:
            left = (obj.expires_at - timezone.now()).total_seconds()
            if left < 86400:
                return state, "Expires within a day"
            return state, f"Expires in {math.ceil(left / 86400)} d"
        return state, state.capitalize()

    def get_fieldsets(self, request: HttpRequest, obj: Model | None = None) -> Any:
        fieldsets = super().get_fieldsets(request, obj)
        if obj is None:
            return fieldsets
        (name, options), *rest = fieldsets
        readonly = ["prefix", "created_by", "created_at", "last_used_at", "revoked_at"]
        return [(name, {**options, "fields": [*options["fields"], *readonly]}), *rest]

    def get_readonly_fields(self, request: HttpRequest, obj: Model | None = None) -> Any:
        # The role and expiry of an existing key are fixed: other ones are a new key.
        if obj is not None:
            return [*self.readonly_fields, "role", "expires_at"]
        return self.readonly_fields

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
            agency_id=agency_id,
            name=obj.name,
            role=obj.role,
            created_by_id=request.user.pk,
            expires_at=obj.expires_at,
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
