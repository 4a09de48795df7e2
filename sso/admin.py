"""Single sign-on in the admin: an agency's admins set up its provider. The client secret is
write-only (never rendered back; blank keeps it); other roles do not see the page."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import Model
from django.http import HttpRequest

from core.admin_scoping import ADMIN_ROLES, AgencyScopedAdmin, has_role
from sso.models import SsoIdentity, SsoProvider


class SsoProviderForm(forms.ModelForm[SsoProvider]):
    client_secret = forms.CharField(
        required=False,
        label="Client secret",
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Write-only: the stored secret is never shown. Leave blank to keep it.",
    )

    class Meta:
        model = SsoProvider
        fields = ("slug",)  # the admin adds the fields of its fieldsets

    def clean_allowed_domains(self) -> list[str]:
        domains = [d.strip().lower() for d in self.cleaned_data.get("allowed_domains") or []]
        if not domains:
            raise forms.ValidationError("Name at least one e-mail domain.")
        return domains

    def clean(self) -> dict[str, Any]:
        cleaned: dict[str, Any] = super().clean() or {}
        moved = {"issuer", "client_id", "agency"} & set(self.changed_data)
        if moved and self.instance.has_client_secret and not cleaned.get("client_secret"):
            # A stored secret goes only to the issuer it was entered for.
            self.add_error(
                "client_secret", "The issuer or client changed: enter the client secret again."
            )
        return cleaned


@admin.register(SsoProvider)
class SsoProviderAdmin(AgencyScopedAdmin):
    form = SsoProviderForm
    write_roles = ADMIN_ROLES
    list_display = ["display_name", "slug", "issuer", "is_enabled", "new_member_role"]
    readonly_fields = ["has_client_secret", "created_at", "updated_at"]
    fieldsets = [
        (None, {"fields": ["display_name", "slug", "is_enabled"]}),
        ("Provider", {"fields": ["issuer", "client_id", "client_secret", "has_client_secret"]}),
        (
            "Who may sign in",
            {"fields": ["allowed_domains", "new_member_role", "password_login_allowed"]},
        ),
    ]

    def has_module_permission(self, request: HttpRequest) -> bool:
        return super().has_module_permission(request) and (
            request.user.is_superuser or has_role(request, ADMIN_ROLES)
        )

    def has_view_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return self.has_module_permission(request)

    @admin.display(boolean=True, description="Secret stored")
    def has_client_secret(self, obj: SsoProvider) -> bool:
        return obj.has_client_secret

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        if form.cleaned_data.get("client_secret"):
            obj.set_client_secret(form.cleaned_data["client_secret"])
        super().save_model(request, obj, form, change)


@admin.register(SsoIdentity)
class SsoIdentityAdmin(AgencyScopedAdmin):
    """Who signed in through the provider (read-only: a sign-in writes it; removing the member
    ends their access, their identity goes with the user)."""

    write_roles = ADMIN_ROLES
    list_display = ["user", "subject", "provider", "last_login_at"]
    list_select_related = ["user", "provider"]
    search_fields = ["user__email", "subject"]
    readonly_fields = ["provider", "subject", "user", "last_login_at"]
    fields = ["provider", "subject", "user", "last_login_at"]

    def has_module_permission(self, request: HttpRequest) -> bool:
        return super().has_module_permission(request) and (
            request.user.is_superuser or has_role(request, ADMIN_ROLES)
        )

    def has_view_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return self.has_module_permission(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False
