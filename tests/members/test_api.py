"""Members and invitations over REST: agency admins manage them, every member reads the member
list, bad input is a 400 with a message and changes nothing, another agency's rows are 404s."""

from __future__ import annotations

from typing import Any

import pytest

from core.models import Membership, Role
from members.models import Invitation, InvitationStatus
from tests.api.conftest import Tenant, count, fields_of, key_client, token_client
from tests.members.helpers import link_in, membership_of

MEMBERS = "/api/v1/members/"
INVITATIONS = "/api/v1/invitations/"


def error_of(response: Any) -> dict[str, Any]:
    body = response.json()
    assert set(body) == {"message", "code", "extra"}, body
    return dict(body)


def test_an_admin_invites_and_the_invitation_is_listed_without_its_token(
    tenant_a: Tenant, as_role: Any, mailoutbox: list[Any]
) -> None:
    admin = as_role(Role.ADMIN)
    created = admin.post(INVITATIONS, {"email": "sam@example.com", "role": "viewer"}, format="json")
    assert created.status_code == 201, created.json()
    body = created.json()
    assert (body["email"], body["role"], body["status"]) == ("sam@example.com", "viewer", "pending")
    assert body["invited_by"] == tenant_a.users[Role.ADMIN].pk
    assert "token" not in str(body)
    assert "hash" not in str(body)
    _link, token = link_in(mailoutbox[0])
    listed = admin.get(INVITATIONS).json()
    assert listed["count"] == 1
    assert token not in str(listed)


@pytest.mark.parametrize(
    "case",
    [
        ({"email": "not-an-address"}, "email", "invalid"),
        ({"email": "sam@example.com", "role": "owner"}, "role", "invalid"),
        ({"role": "viewer"}, "email", "invalid"),
        ({"email": "sam@example.com", "token": "x"}, "token", "invalid"),
        ({"email": "sam@example.com", "username": "no spaces"}, "username", "invalid_username"),
    ],
)
def test_bad_invitations_are_400s_that_write_nothing(
    tenant_a: Tenant, as_role: Any, mailoutbox: list[Any], case: tuple[dict[str, Any], str, str]
) -> None:
    body, field, code = case
    response = as_role(Role.ADMIN).post(INVITATIONS, body, format="json")
    assert field in fields_of(response)
    assert error_of(response)["code"] == code
    assert response.json()["message"]
    assert count(Invitation) == 0
    assert mailoutbox == []


def test_duplicates_and_members_are_refused_by_name(tenant_a: Tenant, as_role: Any) -> None:
    admin = as_role(Role.ADMIN)
    first = admin.post(INVITATIONS, {"email": "sam@example.com"}, format="json").json()
    again = admin.post(INVITATIONS, {"email": "Sam@Example.com"}, format="json")
    assert again.status_code == 409
    assert error_of(again)["code"] == "duplicate_invitation"
    assert again.json()["extra"]["invitation_id"] == first["id"]
    member_email = tenant_a.users[Role.VIEWER].email
    member = admin.post(INVITATIONS, {"email": member_email}, format="json")
    assert (member.status_code, error_of(member)["code"]) == (409, "already_member")
    assert count(Invitation) == 1


def test_resend_and_revoke(tenant_a: Tenant, as_role: Any, mailoutbox: list[Any]) -> None:
    admin = as_role(Role.ADMIN)
    created = admin.post(INVITATIONS, {"email": "sam@example.com"}, format="json").json()
    url = f"{INVITATIONS}{created['id']}/"
    resent = admin.post(f"{url}resend/")
    assert resent.status_code == 200
    assert resent.json()["send_count"] == 2
    assert link_in(mailoutbox[0])[1] != link_in(mailoutbox[1])[1]
    assert admin.post(f"{url}resend/", {"x": 1}, format="json").status_code == 400
    revoked = admin.post(f"{url}revoke/")
    assert (revoked.status_code, revoked.json()["status"]) == (200, InvitationStatus.REVOKED)
    refused = admin.post(f"{url}resend/")
    assert (refused.status_code, error_of(refused)["code"]) == (409, "not_pending")
    assert len(mailoutbox) == 2


def test_every_member_reads_the_members_and_admins_change_roles(
    tenant_a: Tenant, as_role: Any
) -> None:
    listed = as_role(Role.VIEWER).get(MEMBERS)
    assert listed.status_code == 200
    rows = {row["username"]: row for row in listed.json()["results"]}
    viewer = tenant_a.users[Role.VIEWER]
    assert set(rows) == {u.username for u in tenant_a.users.values()}
    assert rows[viewer.username]["role"] == "viewer"
    assert rows[viewer.username]["email"] == viewer.email
    member_id = rows[viewer.username]["id"]

    assert (
        as_role(Role.STAFF)
        .patch(f"{MEMBERS}{member_id}/", {"role": "admin"}, format="json")
        .status_code
        == 403
    )
    changed = as_role(Role.ADMIN).patch(
        f"{MEMBERS}{member_id}/", {"role": "approver"}, format="json"
    )
    assert (changed.status_code, changed.json()["role"]) == (200, "approver")
    bad = as_role(Role.ADMIN).patch(f"{MEMBERS}{member_id}/", {"role": "root"}, format="json")
    assert "role" in fields_of(bad)
    assert membership_of(viewer).role == Role.APPROVER  # type: ignore[union-attr]


def test_the_last_admin_is_kept_and_a_removed_member_loses_access(
    tenant_a: Tenant, as_role: Any
) -> None:
    admin_user = tenant_a.users[Role.ADMIN]
    admin = token_client(admin_user)
    own = membership_of(admin_user)
    assert own is not None
    demote = admin.patch(f"{MEMBERS}{own.pk}/", {"role": "staff"}, format="json")
    assert (demote.status_code, error_of(demote)["code"]) == (400, "last_admin")
    remove = admin.delete(f"{MEMBERS}{own.pk}/")
    assert (remove.status_code, error_of(remove)["code"]) == (400, "last_admin")
    assert "last admin" in remove.json()["message"]

    staff_user = tenant_a.users[Role.STAFF]
    staff = token_client(staff_user)
    assert staff.get("/api/v1/agents/").status_code == 200
    staff_membership = membership_of(staff_user)
    assert staff_membership is not None
    assert admin.delete(f"{MEMBERS}{staff_membership.pk}/").status_code == 204
    assert membership_of(staff_user) is None
    assert staff.get("/api/v1/agents/").status_code == 403  # from the next request on
    assert count(Membership, agency=tenant_a.agency, role=Role.ADMIN) == 1


def test_another_agency_sees_none_of_it(tenant_a: Tenant, tenant_b: Tenant, as_role: Any) -> None:
    created = (
        as_role(Role.ADMIN).post(INVITATIONS, {"email": "sam@example.com"}, format="json").json()
    )
    theirs = token_client(tenant_b.users[Role.ADMIN])
    assert theirs.get(INVITATIONS).json()["count"] == 0
    assert theirs.get(f"{INVITATIONS}{created['id']}/").status_code == 404
    assert theirs.post(f"{INVITATIONS}{created['id']}/revoke/").status_code == 404
    a_member = membership_of(tenant_a.users[Role.VIEWER])
    assert a_member is not None
    assert theirs.get(f"{MEMBERS}{a_member.pk}/").status_code == 404
    assert (
        theirs.patch(f"{MEMBERS}{a_member.pk}/", {"role": "admin"}, format="json").status_code
        == 404
    )
    assert theirs.delete(f"{MEMBERS}{a_member.pk}/").status_code == 404
    names = {row["username"] for row in theirs.get(MEMBERS).json()["results"]}
    assert names == {u.username for u in tenant_b.users.values()}
    assert membership_of(tenant_a.users[Role.VIEWER]).role == Role.VIEWER  # type: ignore[union-attr]


def test_an_admin_api_key_invites_with_no_inviter(tenant_a: Tenant) -> None:
    client = key_client(tenant_a.agency, Role.ADMIN)
    created = client.post(INVITATIONS, {"email": "bot-invite@example.com"}, format="json")
    assert created.status_code == 201
    assert created.json()["invited_by"] is None
    staff_key = key_client(tenant_a.agency, Role.STAFF)
    assert staff_key.get(INVITATIONS).status_code == 403
    assert staff_key.get(MEMBERS).status_code == 200
