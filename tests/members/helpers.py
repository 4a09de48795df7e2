"""Invitations as the tests make and read them."""

from __future__ import annotations

import re
from typing import Any

from core import tenancy
from core.models import Agency, Membership, Role, User
from members import services
from members.models import Invitation

LINK = re.compile(r"https?://[^\s\"<>]+/invitations/(?P<token>[A-Za-z0-9_\-]+)/")


def link_in(message: Any) -> tuple[str, str]:
    """(link, token) of the invitation e-mail ``message``."""
    found = LINK.search(message.body)
    assert found is not None, message.body
    return found.group(0), found.group("token")


def invite(
    agency: Agency,
    email: str,
    role: str = Role.VIEWER,
    *,
    by: User | None = None,
    username: str = "",
) -> Invitation:
    with tenancy.agency_context(agency.id):
        return services.invitation_create(
            agency=agency, email=email, role=role, username=username, invited_by=by
        )


def fetch_invitation(pk: Any) -> Invitation:
    with tenancy.platform_context():
        return Invitation.objects.get(pk=pk)


def membership_of(user: User) -> Membership | None:
    with tenancy.platform_context():
        return Membership.objects.filter(user=user).select_related("agency").first()


def roles_in(agency: Agency) -> dict[str, str]:
    with tenancy.platform_context():
        rows = Membership.objects.filter(agency=agency).select_related("user")
        return {m.user.username: m.role for m in rows}
