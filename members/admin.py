"""The agency's people in the admin: the Members page (core's Membership, scoped to the agency)
with its "Invite a member" button and pending invitations, and the Invitations page (invite,
resend, revoke). Agency admins change them; every member reads the member list."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils import timezone
from unfold.decorators import action, display

from core.admin_empty import EmptyState
from core.admin_scoping import ADMIN_ROLES, AgencyScopedAdmin, has_role, request_agency
from core.exceptions import ApplicationError
from core.models import Agency, Membership, Role, User
from members import services
from members.forms import InviteForm
from members.models import Invitation, InvitationStatus

STATUS_COLOURS = {
    InvitationStatus.PENDING: "info",
    InvitationStatus.ACCEPTED: "success",
    InvitationStatus.REVOKED: "danger",
    InvitationStatus.EXPIRED: "warning",
}


def _invitations_url() -> str:
    return reverse("admin:members_invitation_changelist")


class MemberForm(forms.ModelForm[Membership]):
    """A member's role. The agency's last admin keeps theirs (said here; the service checks it
    again under lock when saving)."""

    class Meta:
        model = Membership
        fields = ["role"]

    def clean_role(self) -> str:
        role: str = self.cleaned_data["role"]
        member = self.instance
        if member.pk and member.role == Role.ADMIN and role != Role.ADMIN:
            admins = Membership.objects.filter(agency_id=member.agency_id, role=Role.ADMIN)
            if not admins.exclude(pk=member.pk).exists():
                raise forms.ValidationError(
                    "The agency's last admin cannot be demoted: make another member admin first."
                )
        return role


@admin.register(Membership)
class MemberAdmin(AgencyScopedAdmin):
    list_display = ["username", "email", "full_name", "role_badge", "joined", "last_login"]
    list_filter = ["role"]
    search_fields = ["user__username", "user__email", "user__first_name", "user__last_name"]
    list_select_related = ["user"]
    ordering = ["created_at"]
    # Only agency admins manage members.
    write_roles = ADMIN_ROLES
    actions_list = ["invite"]
    list_after_template = "members/admin/pending_invitations.html"

    # --- columns ------------------------------------------------------------------------------
    @display(description="Username", ordering="user__username")
    def username(self, obj: Membership) -> str:
        return obj.user.get_username()

    @display(description="E-mail", ordering="user__email")
    def email(self, obj: Membership) -> str:
        return obj.user.email

    @display(description="Name")
    def full_name(self, obj: Membership) -> str:
        return obj.user.get_full_name() or "-"

    @display(
        description="Role",
        ordering="role",
        label={
            Role.ADMIN: "primary",
            Role.STAFF: "info",
            Role.APPROVER: "warning",
            Role.VIEWER: "default",
        },
    )
    def role_badge(self, obj: Membership) -> Any:
        return obj.role, obj.get_role_display()

    @display(description="Joined", ordering="created_at")
    def joined(self, obj: Membership) -> Any:
        return obj.created_at

    @display(description="Last login", ordering="user__last_login")
    def last_login(self, obj: Membership) -> Any:
        return obj.user.last_login or "never"

    # --- who may do what -----------------------------------------------------------------------
    def has_add_permission(self, request: HttpRequest) -> bool:
        # Agency admins invite (the Invite button); a superuser may attach an existing login.
        return request.user.is_superuser

    def has_invite_permission(self, request: HttpRequest) -> bool:
        return self.has_module_permission(request) and has_role(request, ADMIN_ROLES)

    def get_actions(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        # One at a time, through the service's last-admin check (delete_model).
        actions = super().get_actions(request, *args, **kwargs)
        actions.pop("delete_selected", None)
        return actions

    # --- the form ------------------------------------------------------------------------------
    def get_form(
        self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any
    ) -> Any:
        if obj is not None:
            kwargs["form"] = MemberForm
        return super().get_form(request, obj, change, **kwargs)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is None:
            return ["agency", "user", "role"] if request.user.is_superuser else ["role"]
        return ["user", "role", "created_at"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return ["user", "created_at"] if obj is not None else []

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        # Logins are platform-wide: an agency admin never picks among them (no other agency's
        # usernames are disclosed); a superuser attaches a login with no agency yet.
        if db_field.name == "user":
            kwargs["queryset"] = User.objects.filter(membership__isnull=True, is_superuser=False)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    # --- writes through the services ------------------------------------------------------------
    def save_model(self, request: HttpRequest, obj: Membership, form: Any, change: bool) -> None:
        if not change:
            super().save_model(request, obj, form, change)
            return
        saved = services.membership_change_role(membership=obj, role=obj.role)
        obj.role = saved.role

    def delete_model(self, request: HttpRequest, obj: Membership) -> None:
        services.membership_remove(membership=obj)

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> Any:
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except ApplicationError as error:  # a race the form could not see: nothing was saved
            self.message_user(request, error.message, messages.ERROR)
            return HttpResponseRedirect(request.path)

    def delete_view(
        self, request: HttpRequest, object_id: str, extra_context: dict[str, Any] | None = None
    ) -> Any:
        try:
            return super().delete_view(request, object_id, extra_context)
        except ApplicationError as error:
            self.message_user(request, error.message, messages.ERROR)
            return HttpResponseRedirect(reverse("admin:core_membership_changelist"))

    # --- the Invite button and pending invitations ----------------------------------------------
    @action(description="Invite a member", icon="person_add", permissions=["invite"])
    def invite(self, request: HttpRequest) -> HttpResponse:
        return HttpResponseRedirect(reverse("admin:members_invitation_add"))

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> Any:
        extra = dict(extra_context or {})
        if self.has_invite_permission(request):
            pending = Invitation.objects.filter(
                accepted_at__isnull=True, revoked_at__isnull=True, expires_at__gt=timezone.now()
            ).select_related("invited_by")
            agency = request_agency(request)
            if agency is not None:
                pending = pending.filter(agency=agency)
            extra["pending_invitations"] = list(pending.order_by("-created_at")[:20])
            extra["invitations_url"] = _invitations_url()
            extra["invite_url"] = reverse("admin:members_invitation_add")
        return super().changelist_view(request, extra)


class InvitationStatusFilter(admin.SimpleListFilter):
    title = "status"
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: Any) -> Any:
        return InvitationStatus.choices

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        now = timezone.now()
        open_ = Q(accepted_at__isnull=True, revoked_at__isnull=True)
        match self.value():
            case InvitationStatus.PENDING:
                return queryset.filter(open_, expires_at__gt=now)
            case InvitationStatus.ACCEPTED:
                return queryset.filter(accepted_at__isnull=False)
            case InvitationStatus.REVOKED:
                return queryset.filter(revoked_at__isnull=False)
            case InvitationStatus.EXPIRED:
                return queryset.filter(open_, expires_at__lte=now)
        return queryset


@admin.register(Invitation)
class InvitationAdmin(AgencyScopedAdmin):
    """Agency admins only, reads included. The add page is the invite form; an invitation is
    never edited: it is resent (a new link) or revoked."""

    empty_state = EmptyState(
        "No invitation yet",
        "Invite a colleague by e-mail with a role: they get a link to set their password and "
        "join your agency. Each invitation is listed here, pending until it is accepted.",
    )

    form = InviteForm
    write_roles = ADMIN_ROLES
    list_display = [
        "email", "role", "status_badge", "invited_by", "expires_at", "send_count", "created_at",
    ]  # fmt: skip
    list_filter = [InvitationStatusFilter, "role"]
    search_fields = ["email", "username"]
    list_select_related = ["invited_by", "accepted_by"]
    actions = ["resend", "revoke"]
    readonly_fields = [
        "email", "role", "username", "status_badge", "invited_by", "expires_at", "last_sent_at",
        "send_count", "accepted_at", "accepted_by", "revoked_at", "created_at",
    ]  # fmt: skip

    @display(description="Status", label={k.value: v for k, v in STATUS_COLOURS.items()})
    def status_badge(self, obj: Invitation) -> Any:
        return obj.status, InvitationStatus(obj.status).label

    # --- who may do what -----------------------------------------------------------------------
    def has_module_permission(self, request: HttpRequest) -> bool:
        return super().has_module_permission(request) and has_role(request, ADMIN_ROLES)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_resend_permission(self, request: HttpRequest) -> bool:
        return self.has_add_permission(request)

    def has_revoke_permission(self, request: HttpRequest) -> bool:
        return self.has_add_permission(request)

    # --- the invite form -----------------------------------------------------------------------
    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is not None:
            return self.readonly_fields
        return ["agency", "email", "role", "username"] if request.user.is_superuser else [
            "email", "role", "username",
        ]  # fmt: skip

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return self.readonly_fields if obj is not None else []

    def get_form(
        self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any
    ) -> Any:
        form = super().get_form(request, obj, change, **kwargs)
        agency = request_agency(request)

        class CheckedInviteForm(form):  # type: ignore[valid-type,misc]
            """The service's checks as form errors (bad address, already a member, pending)."""

            def clean(self) -> dict[str, Any]:
                cleaned: dict[str, Any] = super().clean()
                target: Agency | None = agency or cleaned.get("agency")
                if target is None or self.errors:
                    return cleaned
                try:
                    email, role, username = services.invitation_check(
                        agency=target,
                        email=cleaned.get("email", ""),
                        role=cleaned.get("role", ""),
                        username=cleaned.get("username", ""),
                    )
                except ApplicationError as error:
                    fields = error.extra.get("fields") or {}
                    field = next((f for f in fields if f in self.fields), None)
                    self.add_error(field, error.message)
                    return cleaned
                cleaned.update(email=email, role=role, username=username)
                return cleaned

            def validate_unique(self) -> None:
                """The one-open-invitation constraint is the service's to report (an expired
                open invitation is revoked on the way, not a conflict)."""

        CheckedInviteForm.__name__ = form.__name__
        return CheckedInviteForm

    def save_model(self, request: HttpRequest, obj: Invitation, form: Any, change: bool) -> None:
        agency = request_agency(request) or form.cleaned_data["agency"]
        invitation = services.invitation_create(
            agency=agency,
            email=form.cleaned_data["email"],
            role=form.cleaned_data["role"],
            username=form.cleaned_data.get("username", ""),
            invited_by=request.user,  # type: ignore[arg-type]
        )
        # The admin's messages and log entry name the row the service wrote.
        obj.pk, obj.agency, obj.email = invitation.pk, agency, invitation.email
        obj._state.adding = False

    def response_add(
        self, request: HttpRequest, obj: Invitation, post_url_continue: Any = None
    ) -> Any:
        self.message_user(
            request, f"Invitation sent to {obj.email}. The link works once, for "
            f"{services.expiry_days()} days.", messages.SUCCESS,
        )  # fmt: skip
        return HttpResponseRedirect(reverse("admin:core_membership_changelist"))

    def add_view(
        self, request: HttpRequest, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> Any:
        extra = {
            "title": "Invite a member",
            # One button: saving sends the e-mail and returns to the Members page.
            "show_save_and_add_another": False,
            "show_save_and_continue": False,
            **(extra_context or {}),
        }
        try:
            return super().add_view(request, form_url, extra)
        except ApplicationError as error:  # the mail server refused, or a race: nothing saved
            self.message_user(request, error.message, messages.ERROR)
            return HttpResponseRedirect(request.path)

    # --- resend and revoke -----------------------------------------------------------------------
    @admin.action(
        description="Resend the selected invitations (a new link)", permissions=["resend"]
    )
    def resend(self, request: HttpRequest, queryset: QuerySet[Invitation]) -> None:
        done, refused = 0, []
        for invitation in queryset.select_related("agency"):
            try:
                services.invitation_resend(invitation=invitation, agency=invitation.agency)
            except ApplicationError as error:
                refused.append(f"{invitation.email}: {error.message}")
            else:
                done += 1
        if done:
            self.message_user(request, f"Sent {done} invitation(s) again.", messages.SUCCESS)
        for line in refused:
            self.message_user(request, line, messages.WARNING)

    @admin.action(description="Revoke the selected invitations", permissions=["revoke"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[Invitation]) -> None:
        done, refused = 0, []
        for invitation in queryset:
            try:
                services.invitation_revoke(invitation=invitation)
            except ApplicationError as error:
                refused.append(f"{invitation.email}: {error.message}")
            else:
                done += 1
        if done:
            self.message_user(request, f"Revoked {done} invitation(s).", messages.SUCCESS)
        for line in refused:
            self.message_user(request, line, messages.WARNING)
