"""Outbound webhooks in the admin: agency admins and staff subscribe a URL to events (the secret
is shown once, in the confirmation message), activate or deactivate it, rotate its secret, and
read each delivery with its attempts, sending one again by hand. Viewers and approvers do not
see them. Registered by :mod:`webhooks.admin`."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import Model, QuerySet
from django.forms import ModelForm
from django.http import HttpRequest

from core.admin_empty import EmptyState
from core.admin_scoping import (
    WRITE_ROLES,
    AgencyScopedAdmin,
    ReadOnlyAdminMixin,
    ScopedInlineMixin,
    TabularInline,
    has_role,
    request_agency,
)
from core.exceptions import ApplicationError
from webhooks.outbound.events import BadEventTypes, clean_event_types
from webhooks.outbound.models import Delivery, DeliveryAttempt, Subscription
from webhooks.outbound.services import (
    clean_url,
    delivery_resend,
    subscription_create,
    subscription_rotate,
    subscription_update,
)
from webhooks.secret_html import shown_once

_READONLY = [
    "consecutive_failures",
    "disabled_at",
    "rotated_at",
    "previous_secret_expires_at",
    "created_by",
    "created_at",
]


class SubscriptionForm(forms.ModelForm[Subscription]):
    """The services' checks, as field errors: the URL's scheme and address, the event types."""

    def clean_url(self) -> str:
        try:
            return clean_url(self.cleaned_data.get("url") or "")
        except ApplicationError as exc:
            raise forms.ValidationError(exc.message) from None

    def clean_event_types(self) -> list[str]:
        try:
            return clean_event_types(list(self.cleaned_data.get("event_types") or []))
        except BadEventTypes as exc:
            raise forms.ValidationError(str(exc)) from None


class _WriteRolesOnly(AgencyScopedAdmin):
    write_roles = WRITE_ROLES

    def has_module_permission(self, request: HttpRequest) -> bool:
        return super().has_module_permission(request) and has_role(request, WRITE_ROLES)

    def has_view_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return self.has_module_permission(request)


@admin.register(Subscription)
class SubscriptionAdmin(_WriteRolesOnly):
    form = SubscriptionForm
    empty_state = EmptyState(
        "No outbound webhook yet",
        "An outbound webhook POSTs your agency's events (a run failed, an approval is waiting, "
        "...) to a URL of another system, signed. Add one; its secret is shown once, to copy.",
    )
    list_display = ["name", "url", "is_active", "consecutive_failures", "disabled_at"]
    list_filter = ["is_active"]
    search_fields = ["name", "url"]
    readonly_fields = _READONLY
    actions = ["rotate_with_overlap", "rotate_at_once", "activate", "deactivate"]

    def get_fields(self, request: HttpRequest, obj: Model | None = None) -> Any:
        editable = ["name", "url", "event_types", "is_active"]
        return editable if obj is None else [*editable, *_READONLY]

    def get_fieldsets(self, request: HttpRequest, obj: Model | None = None) -> Any:
        return [(None, {"fields": self.get_fields(request, obj)})]

    def get_exclude(self, request: HttpRequest, obj: Model | None = None) -> Any:
        return ["agency"]  # the staff member's agency; a superuser acts in one (the header)

    def save_model(
        self, request: HttpRequest, obj: Any, form: ModelForm[Any], change: bool
    ) -> None:
        if change:
            subscription_update(
                subscription=obj,
                name=obj.name,
                url=obj.url,
                event_types=obj.event_types,
                is_active=obj.is_active,
            )
            return
        agency = request_agency(request)
        if agency is None:
            raise ApplicationError("agency_required", "Pick the agency to act in first.")
        subscription, secret = subscription_create(
            agency_id=agency.pk,
            name=obj.name,
            url=obj.url,
            event_types=obj.event_types,
            is_active=obj.is_active,
            created_by_id=request.user.pk,
        )
        obj.pk, obj.agency_id, obj.created_at, obj.updated_at = (
            subscription.pk,
            subscription.agency_id,
            subscription.created_at,
            subscription.updated_at,
        )
        obj._state.adding = False
        messages.warning(
            request,
            _shown_once(f"{subscription.name}: deliveries are signed with the secret", secret),
        )

    def _rotate(
        self, request: HttpRequest, queryset: QuerySet[Subscription], overlap: int | None
    ) -> None:
        for subscription in queryset:
            rotated, secret = subscription_rotate(
                subscription=subscription, overlap_seconds=overlap
            )
            until = rotated.previous_secret_expires_at
            kept = (
                f"the old one signs too until {until:%Y-%m-%d %H:%M} UTC"
                if until
                else "the old one signs nothing from now on"
            )
            messages.warning(
                request, _shown_once(f"{rotated.name} ({kept}): the new secret is", secret)
            )

    @admin.action(
        description="Rotate the secret (old one signs too for a while)", permissions=["change"]
    )
    def rotate_with_overlap(self, request: HttpRequest, queryset: QuerySet[Subscription]) -> None:
        self._rotate(request, queryset, None)

    @admin.action(description="Rotate the secret (old one dropped at once)", permissions=["change"])
    def rotate_at_once(self, request: HttpRequest, queryset: QuerySet[Subscription]) -> None:
        self._rotate(request, queryset, 0)

    @admin.action(description="Activate (clears the failure count)", permissions=["change"])
    def activate(self, request: HttpRequest, queryset: QuerySet[Subscription]) -> None:
        for subscription in queryset:
            subscription_update(subscription=subscription, is_active=True)
        self.message_user(request, f"Activated {len(queryset)} outbound webhook(s).")

    @admin.action(description="Deactivate (send nothing)", permissions=["change"])
    def deactivate(self, request: HttpRequest, queryset: QuerySet[Subscription]) -> None:
        for subscription in queryset:
            subscription_update(subscription=subscription, is_active=False)
        self.message_user(request, f"Deactivated {len(queryset)} outbound webhook(s).")


def _shown_once(before: str, secret: str) -> Any:
    return shown_once(
        before, secret, "— copy it now: it is stored encrypted and will not be shown again."
    )


class AttemptInline(ScopedInlineMixin, TabularInline):
    model = DeliveryAttempt
    read_only = True
    extra = 0
    can_delete = False
    fields = (
        "number",
        "manual",
        "created_at",
        "status_code",
        "latency_ms",
        "error",
        "response_body",
    )
    readonly_fields = fields


@admin.register(Delivery)
class DeliveryAdmin(ReadOnlyAdminMixin, _WriteRolesOnly):
    list_display = [
        "event_type",
        "subscription",
        "status",
        "attempts",
        "last_status_code",
        "next_attempt_at",
        "created_at",
    ]
    list_filter = ["status", "event_type"]
    search_fields = ["event_type", "subscription__name"]
    list_select_related = ["subscription"]
    inlines = [AttemptInline]
    actions = ["resend"]

    def has_resend_permission(self, request: HttpRequest) -> bool:
        return has_role(request, WRITE_ROLES)

    @admin.action(description="Send again now", permissions=["resend"])
    def resend(self, request: HttpRequest, queryset: QuerySet[Delivery]) -> None:
        sent = 0
        for delivery in queryset.select_related("subscription"):
            try:
                delivery_resend(delivery=delivery)
            except ApplicationError as exc:
                self.message_user(request, f"{delivery}: {exc.message}", messages.ERROR)
                continue
            sent += 1
        self.message_user(request, f"{sent} delivery(ies) sent again.")
