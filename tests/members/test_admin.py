"""The Members and Invitations pages: an agency admin invites, resends, revokes, changes roles and
removes members; nobody else does; the last admin stays."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from core.models import Agency, Membership, Role, User
from members.models import Invitation, InvitationStatus
from tests.admin.conftest import member
from tests.admin.helpers import admin_url
from tests.members.helpers import fetch_invitation, invite, link_in, membership_of, roles_in

pytestmark = pytest.mark.django_db

MEMBERS = admin_url(Membership, "changelist")
INVITE = admin_url(Invitation, "add")
INVITATIONS = admin_url(Invitation, "changelist")


def test_an_agency_admin_invites_from_the_members_page(
    agency: Agency, login: Callable[[User], Client], mailoutbox: list[Any]
) -> None:
    client = login(member(agency, Role.ADMIN))
    page = client.get(MEMBERS).content.decode()
    assert "Invite a member" in page
    assert INVITE in page
    form = client.get(INVITE)
    assert form.status_code == 200
    assert 'name="agency"' not in form.content.decode()  # the admin's own agency, always

    sent = client.post(INVITE, {"email": "sam@example.com", "role": "approver"}, follow=True)
    assert sent.redirect_chain[-1][0] == MEMBERS
    assert "Invitation sent to sam@example.com" in sent.content.decode()
    assert len(mailoutbox) == 1
    assert mailoutbox[0].to == ["sam@example.com"]
    pending = sent.content.decode().split('id="pending-invitations"')[1]
    assert "sam@example.com" in pending
    assert "Approver" in pending


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"email": "nope", "role": "viewer"}, "Enter a valid email address."),
        ({"email": "sam@example.com", "role": "owner"}, "Select a valid choice."),
        ({"email": "dup@example.com", "role": "viewer"}, "already has a pending invitation"),
        ({"email": "member@example.com", "role": "viewer"}, "is already a member of"),
    ],
)
def test_bad_invitations_are_form_errors(
    agency: Agency,
    login: Callable[[User], Client],
    mailoutbox: list[Any],
    body: dict[str, str],
    message: str,
) -> None:
    from tests.factories import MembershipFactory

    MembershipFactory.create(agency=agency, user__email="member@example.com")
    invite(agency, "dup@example.com")
    response = login(member(agency, Role.ADMIN)).post(INVITE, body)
    assert response.status_code == 200
    assert message in response.content.decode()
    assert len(mailoutbox) == 1  # the set-up's only


@pytest.mark.parametrize("role", [Role.STAFF, Role.APPROVER, Role.VIEWER])
def test_only_admins_invite(agency: Agency, login: Callable[[User], Client], role: str) -> None:
    client = login(member(agency, role))
    page = client.get(MEMBERS)
    assert page.status_code == 200  # every member sees who is in the agency
    assert "Invite a member" not in page.content.decode()
    assert 'id="pending-invitations"' not in page.content.decode()
    assert client.get(INVITE).status_code == 403
    assert client.post(INVITE, {"email": "x@example.com", "role": "admin"}).status_code == 403
    assert client.get(INVITATIONS).status_code == 403


def test_resend_and_revoke_actions(
    agency: Agency, login: Callable[[User], Client], mailoutbox: list[Any]
) -> None:
    invitation = invite(agency, "sam@example.com")
    client = login(member(agency, Role.ADMIN))
    listed = client.get(INVITATIONS).content.decode()
    assert "sam@example.com" in listed
    assert "Pending" in listed
    action = {"_selected_action": [str(invitation.pk)], "index": "0"}
    client.post(INVITATIONS, {**action, "action": "resend"})
    assert len(mailoutbox) == 2
    assert link_in(mailoutbox[0])[1] != link_in(mailoutbox[1])[1]
    client.post(INVITATIONS, {**action, "action": "revoke"})
    assert fetch_invitation(invitation.pk).status == InvitationStatus.REVOKED
    refused = client.post(INVITATIONS, {**action, "action": "resend"}, follow=True)
    assert "was revoked" in refused.content.decode()
    assert len(mailoutbox) == 2

    viewer = login(member(agency, Role.VIEWER))
    viewer.post(INVITATIONS, {**action, "action": "resend"})
    assert len(mailoutbox) == 2


def test_an_admin_changes_roles_and_removes_members_but_keeps_the_last_admin(
    agency: Agency, login: Callable[[User], Client]
) -> None:
    admin_user = member(agency, Role.ADMIN)
    viewer = member(agency, Role.VIEWER)
    client = login(admin_user)
    own, theirs = membership_of(admin_user), membership_of(viewer)
    assert own is not None
    assert theirs is not None
    change = admin_url(Membership, "change", theirs.pk)
    page = client.get(change).content.decode()
    assert viewer.username in page
    assert 'name="user"' not in page

    assert client.post(change, {"role": "staff"}).status_code == 302
    demote = client.post(admin_url(Membership, "change", own.pk), {"role": "viewer"})
    assert demote.status_code == 200
    assert "last admin cannot be demoted" in demote.content.decode()
    remove = client.post(admin_url(Membership, "delete", own.pk), {"post": "yes"}, follow=True)
    assert "last admin cannot be removed" in remove.content.decode()
    assert (
        client.post(admin_url(Membership, "delete", theirs.pk), {"post": "yes"}).status_code == 302
    )
    assert roles_in(agency) == {admin_user.username: Role.ADMIN}

    staff = member(agency, Role.STAFF)
    staff_membership = membership_of(staff)
    assert staff_membership is not None
    staff_change = admin_url(Membership, "change", staff_membership.pk)
    assert login(staff).post(staff_change, {"role": "admin"}).status_code == 403
    assert membership_of(staff).role == Role.STAFF  # type: ignore[union-attr]


def test_a_removed_member_sees_nothing_from_the_next_request(
    agency: Agency, login: Callable[[User], Client]
) -> None:
    staff = member(agency, Role.STAFF)
    staff_client = login(staff)
    assert staff_client.get(MEMBERS).status_code == 200
    membership = membership_of(staff)
    assert membership is not None
    admin_client = login(member(agency, Role.ADMIN))
    admin_client.post(admin_url(Membership, "delete", membership.pk), {"post": "yes"})
    assert staff_client.get(MEMBERS).status_code == 403


def test_another_agencys_members_and_invitations_are_404s(
    agency: Agency, other_agency: Agency, login: Callable[[User], Client]
) -> None:
    theirs = membership_of(member(other_agency, Role.VIEWER))
    their_invitation = invite(other_agency, "x@example.com")
    client = login(member(agency, Role.ADMIN))
    assert theirs is not None
    assert client.get(admin_url(Membership, "change", theirs.pk)).status_code == 404
    assert (
        client.post(admin_url(Membership, "change", theirs.pk), {"role": "admin"}).status_code
        == 404
    )
    assert client.get(admin_url(Invitation, "change", their_invitation.pk)).status_code == 404
    assert "x@example.com" not in client.get(MEMBERS).content.decode()
    assert "x@example.com" not in client.get(INVITATIONS).content.decode()


def test_superusers_invite_for_an_agency_they_pick(
    agency: Agency, login: Callable[[User], Client], mailoutbox: list[Any]
) -> None:
    root = User.objects.create_superuser("root-inv", "root@example.com", "pw")
    client = login(root)
    body = {"agency": str(agency.pk), "email": "sam@example.com", "role": "admin"}
    assert client.post(INVITE, body).status_code == 302
    assert len(mailoutbox) == 1
    assert agency.name in mailoutbox[0].subject


def test_the_sidebar_shows_invitations_to_admins_only(
    agency: Agency, login: Callable[[User], Client]
) -> None:
    assert INVITATIONS in login(member(agency, Role.ADMIN)).get(MEMBERS).content.decode()
    assert INVITATIONS not in login(member(agency, Role.STAFF)).get(MEMBERS).content.decode()
