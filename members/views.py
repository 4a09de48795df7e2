"""``/invitations/<token>/``: where an invitee lands from the e-mail. No login is needed: the
token finds the invitation (members.selectors.invitation_lookup_context), the new member sets a
password (or logs in with the login they already have) and is logged in on the admin."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.auth import authenticate, login
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.debug import sensitive_post_parameters

from core import tenancy
from core.exceptions import ApplicationError
from core.models import Agency, Membership
from members import services
from members.forms import AcceptExistingUserForm, AcceptNewUserForm
from members.models import Invitation, InvitationStatus
from members.selectors import invitation_for_token, users_with_email

BACKEND = "django.contrib.auth.backends.ModelBackend"
UNUSABLE = {
    InvitationStatus.ACCEPTED: "This invitation has already been accepted. Log in instead.",
    InvitationStatus.REVOKED: "This invitation was withdrawn. Ask the person who invited you "
    "for a new one.",
    InvitationStatus.EXPIRED: "This invitation has expired. Ask the person who invited you to "
    "send it again.",
}


def _render(
    request: HttpRequest, template: str, context: dict[str, Any], status: int = 200
) -> HttpResponse:
    base = admin.site.each_context(request)
    response = TemplateResponse(request, template, {**base, **context}, status=status)
    # The token is in the path: never send it on to another site. (Not "no-referrer": the
    # browser would then post the form with "Origin: null", which CSRF protection refuses.)
    response["Referrer-Policy"] = "same-origin"
    return response


def _unusable(request: HttpRequest, invitation: Invitation | None) -> HttpResponse:
    if invitation is None:
        message, status = "This invitation link is not valid. Check that it was copied whole.", 404
    else:
        message, status = UNUSABLE[InvitationStatus(invitation.status)], 410
    context = {"title": "Invitation", "message": message, "login_url": reverse("admin:login")}
    return _render(request, "members/invitation_unusable.html", context, status=status)


def _joined(request: HttpRequest, membership: Membership, agency: Agency) -> HttpResponse:
    login(request, membership.user, backend=BACKEND)
    role = membership.get_role_display()
    messages.success(request, f"Welcome to {agency.name}: you are a member with the {role} role.")
    return HttpResponseRedirect(reverse("admin:index"))


def _apply_error(form: Any, error: ApplicationError) -> None:
    """The service's message beside the field it is about, else above the form."""
    fields = error.extra.get("fields") or {}
    target = next((name for name in fields if name in form.fields), None)
    if target is None and "password" in fields and "password1" in form.fields:
        target = "password1"
    form.add_error(target, error.message)


@never_cache
@sensitive_post_parameters("password", "password1", "password2")
@csrf_protect
def accept(request: HttpRequest, token: str) -> HttpResponse:
    invitation = invitation_for_token(token=token)
    if invitation is None or not invitation.is_pending:
        return _unusable(request, invitation)
    with tenancy.agency_context(invitation.agency_id):
        agency = Agency.objects.get(pk=invitation.agency_id)
    has_login = users_with_email(email=invitation.email).exists()
    form: AcceptExistingUserForm | AcceptNewUserForm
    if has_login:
        form = AcceptExistingUserForm(request.POST or None)
    else:
        initial = {"username": invitation.username or invitation.email.split("@")[0]}
        form = AcceptNewUserForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            if isinstance(form, AcceptExistingUserForm):
                user = authenticate(request, username=data["username"], password=data["password"])
                if user is None:
                    raise ApplicationError(
                        "bad_login", "That username and password do not match a login."
                    )
                membership = services.invitation_accept_existing_user(
                    invitation=invitation, user=user
                )
            else:
                membership = services.invitation_accept_new_user(
                    invitation=invitation, username=data["username"], password=data["password1"]
                )
        except ApplicationError as error:
            _apply_error(form, error)
        else:
            return _joined(request, membership, agency)
    context = {
        "title": f"Join {agency.name}",
        "agency": agency,
        "invitation": invitation,
        "form": form,
        "has_login": has_login,
    }
    status = 400 if request.method == "POST" else 200
    return _render(request, "members/accept.html", context, status=status)
