"""Forms of the invitation pages: the admin's invite form and the invitee's accept forms. They
check the shape of the input; the services decide (and say why they refuse)."""

from __future__ import annotations

from typing import Any

from django import forms
from unfold.widgets import UnfoldAdminPasswordWidget, UnfoldAdminTextInputWidget

from members.models import Invitation


class InviteForm(forms.ModelForm[Invitation]):
    """The admin's "Invite a member" form (members.admin.InvitationAdmin's add page)."""

    class Meta:
        model = Invitation
        fields = ["email", "role", "username"]
        help_texts = {
            "email": "The link is sent here. Someone who already has a login with this address "
            "logs in with it to accept.",
            "role": "Viewer: reads. Approver: reads and decides approvals and questions. Staff: "
            "configures agents and runs them. Admin: all that, and members, providers, budgets, "
            "API keys.",
            "username": "Optional: the new login's username. Empty: the invitee chooses one.",
        }


class AcceptNewUserForm(forms.Form):
    username = forms.CharField(
        max_length=150,
        widget=UnfoldAdminTextInputWidget(attrs={"autocomplete": "username", "autofocus": True}),
        help_text="You log in with this. Letters, digits and @/./+/-/_ only.",
    )
    password1 = forms.CharField(
        label="Password",
        strip=False,
        widget=UnfoldAdminPasswordWidget(attrs={"autocomplete": "new-password"}),
        help_text="At least 8 characters, not only digits, not a common password.",
    )
    password2 = forms.CharField(
        label="Password again",
        strip=False,
        widget=UnfoldAdminPasswordWidget(attrs={"autocomplete": "new-password"}),
    )

    def clean(self) -> dict[str, Any]:
        cleaned: dict[str, Any] = super().clean() or {}
        one, two = cleaned.get("password1"), cleaned.get("password2")
        if one and two and one != two:
            self.add_error("password2", "The two passwords differ.")
        return cleaned


class AcceptExistingUserForm(forms.Form):
    username = forms.CharField(
        max_length=150,
        widget=UnfoldAdminTextInputWidget(attrs={"autocomplete": "username", "autofocus": True}),
    )
    password = forms.CharField(
        strip=False,
        widget=UnfoldAdminPasswordWidget(attrs={"autocomplete": "current-password"}),
    )
