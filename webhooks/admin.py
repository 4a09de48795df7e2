"""Webhooks in the admin: agency admins and staff create one for an agent (the URL and the secret
are shown once, in the confirmation message), disable or enable it, and rotate its secret (with a
day's grace for the old one, or none). Viewers and approvers do not see webhooks."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import Model, QuerySet
from django.forms import ModelForm
from django.http import HttpRequest

from core.admin_empty import EmptyState
from core.admin_scoping import WRITE_ROLES, AgencyScopedAdmin, has_role
from webhooks.models import Webhook
from webhooks.secret_html import shown_once
from webhooks.services import (
    DEFAULT_GRACE_SECONDS,
    webhook_create,
    webhook_rotate,
    webhook_update,
)

_READONLY = [
    "url",
    "rotated_at",
    "previous_secret_expires_at",
    "last_delivery_at",
    "created_by",
    "created_at",
]


@admin.register(Webhook)
class WebhookAdmin(AgencyScopedAdmin):
    empty_state = EmptyState(
        "No webhook yet",
        "A webhook is a URL another system (a form, a CRM, a shop) posts to, to start a run of "
        "one of your agents. Add one and pick the agent; its secret is shown once, to copy.",
    )
    list_display = ["name", "agent", "is_enabled", "url", "last_delivery_at", "rotated_at"]
    list_filter = ["is_enabled"]
    search_fields = ["name", "agent__name"]
    list_select_related = ["agent"]
    readonly_fields = _READONLY
    actions = ["rotate_with_grace", "rotate_at_once", "disable", "enable"]
    write_roles = WRITE_ROLES

    def has_module_permission(self, request: HttpRequest) -> bool:
        return super().has_module_permission(request) and has_role(request, WRITE_ROLES)

    def has_view_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return self.has_module_permission(request)

    def get_fields(self, request: HttpRequest, obj: Model | None = None) -> Any:
        if obj is None:
            return ["agent", "name", "is_enabled"]
        return ["agent", "name", "is_enabled", *_READONLY]

    def get_fieldsets(self, request: HttpRequest, obj: Model | None = None) -> Any:
        return [(None, {"fields": self.get_fields(request, obj)})]

    def get_readonly_fields(self, request: HttpRequest, obj: Model | None = None) -> Any:
        # A webhook stays with its agent: another agent is another URL and secret.
        return [*_READONLY, "agent"] if obj is not None else _READONLY

    def get_exclude(self, request: HttpRequest, obj: Model | None = None) -> Any:
        return ["agency"]  # the agent's, superusers included

    @admin.display(description="URL")
    def url(self, obj: Webhook) -> str:
        return obj.url

    def save_model(
        self, request: HttpRequest, obj: Any, form: ModelForm[Any], change: bool
    ) -> None:
        if change:
            webhook_update(webhook=obj, name=obj.name, is_enabled=obj.is_enabled)
            return
        webhook, secret = webhook_create(
            agent=obj.agent,
            name=obj.name,
            is_enabled=obj.is_enabled,
            created_by_id=request.user.pk,
        )
        obj.pk, obj.agency_id, obj.created_at, obj.updated_at = (
            webhook.pk,
            webhook.agency_id,
            webhook.created_at,
            webhook.updated_at,
        )
        obj.created_by_id = webhook.created_by_id
        obj._state.adding = False
        messages.warning(
            request,
            shown_once(
                f"Deliveries go to {webhook.url} signed with the secret",
                secret,
                "— copy it now: it is stored encrypted and will not be shown again.",
            ),
        )

    def _rotate(self, request: HttpRequest, queryset: QuerySet[Webhook], grace: int) -> None:
        for webhook in queryset:
            rotated, secret = webhook_rotate(webhook=webhook, grace_seconds=grace)
            until = rotated.previous_secret_expires_at
            kept = (
                f"the old one is accepted until {until:%Y-%m-%d %H:%M} UTC"
                if until
                else "the old one is refused from now on"
            )
            messages.warning(
                request,
                shown_once(
                    f"{rotated.name}: the new secret is",
                    secret,
                    f"({kept}) — copy it now: it will not be shown again.",
                ),
            )

    @admin.action(
        description="Rotate the secret (old one accepted for a day)", permissions=["change"]
    )
    def rotate_with_grace(self, request: HttpRequest, queryset: QuerySet[Webhook]) -> None:
        self._rotate(request, queryset, DEFAULT_GRACE_SECONDS)

    @admin.action(description="Rotate the secret (old one refused at once)", permissions=["change"])
    def rotate_at_once(self, request: HttpRequest, queryset: QuerySet[Webhook]) -> None:
        self._rotate(request, queryset, 0)

    @admin.action(description="Disable (refuse every delivery)", permissions=["change"])
    def disable(self, request: HttpRequest, queryset: QuerySet[Webhook]) -> None:
        for webhook in queryset:
            webhook_update(webhook=webhook, is_enabled=False)
        self.message_user(request, f"Disabled {len(queryset)} webhook(s).")

    @admin.action(description="Enable", permissions=["change"])
    def enable(self, request: HttpRequest, queryset: QuerySet[Webhook]) -> None:
        for webhook in queryset:
            webhook_update(webhook=webhook, is_enabled=True)
        self.message_user(request, f"Enabled {len(queryset)} webhook(s).")


# Outbound webhooks' admin pages (registered on import).
from webhooks.outbound import admin as outbound_admin  # noqa: E402, F401
