"""Inviting, accepting, changing roles and removing members: the services' rules."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from django.core import mail
from django.test import override_settings
from django.utils import timezone

from core import tenancy
from core.exceptions import ApplicationError
from core.models import Membership, Role
from members import services
from members.models import Invitation, InvitationStatus, hash_token
from members.selectors import invitation_for_token
from tests.factories import AgencyFactory, MembershipFactory, UserFactory
from tests.members.helpers import fetch_invitation, invite, link_in, membership_of, roles_in

pytestmark = pytest.mark.django_db


def count_invitations(**filters: Any) -> int:
    with tenancy.platform_context():
        return Invitation.objects.filter(**filters).count()


def test_an_invitation_emails_a_one_time_link_and_stores_only_its_hash(
    mailoutbox: list[Any],
) -> None:
    agency = AgencyFactory.create(name="Northwind")
    admin = MembershipFactory.create(agency=agency, role=Role.ADMIN, user__first_name="Ada").user
    invitation = invite(agency, "Sam@Example.COM", Role.APPROVER, by=admin)

    assert len(mailoutbox) == 1
    message = mailoutbox[0]
    assert message.to == ["Sam@example.com"]  # the domain normalised, the local part kept
    assert "Northwind" in message.subject
    assert "Approver" in message.body
    assert "Ada" in message.body
    link, token = link_in(message)
    assert link.startswith("http://localhost:8000/invitations/")  # AGENTDESK_BASE_URL
    saved = fetch_invitation(invitation.pk)
    assert saved.token_hash == hash_token(token)
    assert token not in saved.token_hash
    assert saved.status == InvitationStatus.PENDING
    expected = saved.created_at + datetime.timedelta(days=7)
    assert abs(saved.expires_at - expected) < datetime.timedelta(seconds=5)


@override_settings(AGENTDESK_INVITATION_EXPIRY_DAYS=2)
def test_the_expiry_follows_the_setting() -> None:
    invitation = invite(AgencyFactory.create(), "a@example.com")
    left = invitation.expires_at - timezone.now()
    assert datetime.timedelta(days=1, hours=23) < left <= datetime.timedelta(days=2)


@pytest.mark.parametrize(
    ("email", "role", "username", "code"),
    [
        ("not-an-address", Role.VIEWER, "", "invalid_email"),
        ("", Role.VIEWER, "", "invalid_email"),
        ("ok@example.com", "owner", "", "invalid_role"),
        ("ok@example.com", Role.VIEWER, "bad name!", "invalid_username"),
    ],
)
def test_bad_input_is_refused_with_a_message_and_nothing_is_written(
    email: str, role: str, username: str, code: str, mailoutbox: list[Any]
) -> None:
    agency = AgencyFactory.create()
    with pytest.raises(ApplicationError) as caught:
        invite(agency, email, role, username=username)
    assert caught.value.code == code
    assert caught.value.status == 400
    assert caught.value.message
    assert count_invitations(agency=agency) == 0
    assert mailoutbox == []


def test_a_second_pending_invitation_or_a_member_is_refused() -> None:
    agency = AgencyFactory.create()
    MembershipFactory.create(agency=agency, user__email="member@example.com")
    invite(agency, "sam@example.com")
    with pytest.raises(ApplicationError) as duplicate:
        invite(agency, "SAM@example.com")
    assert duplicate.value.code == "duplicate_invitation"
    assert "resend or revoke" in duplicate.value.message
    with pytest.raises(ApplicationError) as member:
        invite(agency, "Member@Example.com")
    assert member.value.code == "already_member"
    # Another agency may invite the same address.
    invite(AgencyFactory.create(), "sam@example.com")


def test_an_expired_invitation_is_replaced_by_a_new_one(mailoutbox: list[Any]) -> None:
    agency = AgencyFactory.create()
    old = invite(agency, "sam@example.com")
    with tenancy.platform_context():
        Invitation.objects.filter(pk=old.pk).update(
            expires_at=timezone.now() - datetime.timedelta(minutes=1)
        )
    new = invite(agency, "sam@example.com")
    assert fetch_invitation(old.pk).status == InvitationStatus.REVOKED
    assert fetch_invitation(new.pk).status == InvitationStatus.PENDING
    _link, old_token = link_in(mailoutbox[0])
    assert invitation_for_token(token=old_token).status == InvitationStatus.REVOKED  # type: ignore[union-attr]


def test_resend_replaces_the_link_and_revoke_ends_it(mailoutbox: list[Any]) -> None:
    agency = AgencyFactory.create()
    invitation = invite(agency, "sam@example.com")
    _link, first = link_in(mailoutbox[0])
    with tenancy.agency_context(agency.id):
        resent = services.invitation_resend(invitation=invitation, agency=agency)
    _link, second = link_in(mailoutbox[1])
    assert first != second
    assert resent.send_count == 2
    assert invitation_for_token(token=first) is None  # the old link opens nothing
    assert invitation_for_token(token=second).pk == invitation.pk  # type: ignore[union-attr]
    with tenancy.agency_context(agency.id):
        services.invitation_revoke(invitation=invitation)
        services.invitation_revoke(invitation=invitation)  # idempotent
        with pytest.raises(ApplicationError) as caught:
            services.invitation_resend(invitation=invitation, agency=agency)
    assert caught.value.code == "not_pending"
    assert len(mailoutbox) == 2


def test_a_mail_server_that_refuses_leaves_no_invitation() -> None:
    agency = AgencyFactory.create()
    broken = {"default": {"BACKEND": "tests.members.broken_mail.RefusingBackend"}}
    with override_settings(MAILERS=broken), pytest.raises(ApplicationError) as caught:
        invite(agency, "sam@example.com")
    assert (caught.value.code, caught.value.status) == ("mail_unavailable", 503)
    assert count_invitations(agency=agency) == 0


def test_accepting_creates_the_login_and_membership_once(mailoutbox: list[Any]) -> None:
    agency = AgencyFactory.create()
    invitation = invite(agency, "sam@example.com", Role.APPROVER)
    _link, token = link_in(mailoutbox[0])
    found = invitation_for_token(token=token)
    assert found is not None
    membership = services.invitation_accept_new_user(
        invitation=found, username="sam", password="a-long-pass-phrase"
    )
    assert (membership.agency_id, membership.role) == (agency.id, Role.APPROVER)
    user = membership.user
    assert user.email == "sam@example.com"
    assert user.is_staff
    assert not user.is_superuser
    assert user.check_password("a-long-pass-phrase")
    assert fetch_invitation(invitation.pk).status == InvitationStatus.ACCEPTED
    with pytest.raises(ApplicationError) as again:
        services.invitation_accept_new_user(
            invitation=found, username="sam2", password="a-long-pass-phrase"
        )
    assert again.value.code == "invitation_unusable"


def test_accepting_refuses_a_weak_password_or_a_taken_username() -> None:
    agency = AgencyFactory.create()
    UserFactory.create(username="Taken")
    invitation = invite(agency, "sam@example.com")
    with pytest.raises(ApplicationError) as weak:
        services.invitation_accept_new_user(invitation=invitation, username="sam", password="123")
    assert weak.value.code == "weak_password"
    with pytest.raises(ApplicationError) as taken:
        services.invitation_accept_new_user(
            invitation=invitation, username="taken", password="a-long-pass-phrase"
        )
    assert taken.value.code == "username_taken"
    assert fetch_invitation(invitation.pk).status == InvitationStatus.PENDING


def test_an_expired_invitation_cannot_be_accepted() -> None:
    invitation = invite(AgencyFactory.create(), "sam@example.com")
    with tenancy.platform_context():
        Invitation.objects.filter(pk=invitation.pk).update(expires_at=timezone.now())
    with pytest.raises(ApplicationError) as caught:
        services.invitation_accept_new_user(
            invitation=invitation, username="sam", password="a-long-pass-phrase"
        )
    assert caught.value.code == "invitation_unusable"


def test_an_existing_login_joins_by_proving_it_is_theirs() -> None:
    agency = AgencyFactory.create()
    loner = UserFactory.create(email="sam@example.com", is_staff=False)
    invitation = invite(agency, "SAM@example.com", Role.STAFF)
    with pytest.raises(ApplicationError) as new_login:
        services.invitation_accept_new_user(
            invitation=invitation, username="sam-two", password="a-long-pass-phrase"
        )
    assert new_login.value.code == "login_exists"
    stranger = UserFactory.create(email="other@example.com")
    with pytest.raises(ApplicationError) as wrong:
        services.invitation_accept_existing_user(invitation=invitation, user=stranger)
    assert wrong.value.code == "wrong_login"

    membership = services.invitation_accept_existing_user(invitation=invitation, user=loner)
    assert (membership.agency_id, membership.role) == (agency.id, Role.STAFF)
    loner.refresh_from_db()
    assert loner.is_staff  # may use the admin now


def test_a_login_of_another_agency_cannot_join_a_second() -> None:
    other = MembershipFactory.create(user__email="sam@example.com")
    invitation = invite(AgencyFactory.create(), "sam@example.com")
    with pytest.raises(ApplicationError) as caught:
        services.invitation_accept_existing_user(invitation=invitation, user=other.user)
    assert caught.value.code == "member_elsewhere"
    assert membership_of(other.user).agency_id == other.agency_id  # type: ignore[union-attr]


def test_the_last_admin_can_be_neither_demoted_nor_removed() -> None:
    agency = AgencyFactory.create()
    first = MembershipFactory.create(agency=agency, role=Role.ADMIN)
    viewer = MembershipFactory.create(agency=agency, role=Role.VIEWER)
    with tenancy.agency_context(agency.id):
        for attempt in (
            lambda: services.membership_change_role(membership=first, role=Role.STAFF),
            lambda: services.membership_remove(membership=first),
        ):
            with pytest.raises(ApplicationError) as caught:
                attempt()
            assert caught.value.code == "last_admin"
        services.membership_change_role(membership=viewer, role=Role.ADMIN)
        services.membership_change_role(membership=first, role=Role.STAFF)  # another admin now
        with pytest.raises(ApplicationError):
            services.membership_remove(membership=Membership.objects.get(pk=viewer.pk))
        services.membership_remove(membership=Membership.objects.get(pk=first.pk))
        with pytest.raises(ApplicationError) as bad_role:
            services.membership_change_role(membership=viewer, role="root")
    assert bad_role.value.code == "invalid_role"
    assert roles_in(agency) == {viewer.user.username: Role.ADMIN}
    assert membership_of(first.user) is None


def test_mail_outbox_is_the_locmem_backend() -> None:
    # The e-mail tests above read Django's locmem outbox (config/settings/test.py MAILERS).
    assert hasattr(mail, "outbox")
