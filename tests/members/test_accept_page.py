"""``/invitations/<token>/``: the invitee sets a password (or logs in with the login they have),
is logged in and lands in the admin of their agency; a used, revoked, expired or made-up link
opens nothing. Found with no login and no tenant, through the token lookup policy only."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from django.db import connection
from django.http import HttpRequest
from django.test import Client
from django.utils import timezone

from core import tenancy
from core.models import Role
from members.models import Invitation, hash_token
from members.selectors import invitation_lookup_context
from tests.factories import AgencyFactory, MembershipFactory, UserFactory
from tests.members.helpers import fetch_invitation, invite, link_in, membership_of

pytestmark = pytest.mark.django_db
PASSWORD = "correct-horse-battery"


def path_of(link: str) -> str:
    return "/" + link.split("/", 3)[3]


@pytest.fixture
def invited(mailoutbox: list[Any]) -> tuple[Invitation, str]:
    agency = AgencyFactory.create(name="Northwind")
    invitation = invite(agency, "sam@example.com", Role.VIEWER, username="sam")
    link, _token = link_in(mailoutbox[-1])
    return invitation, path_of(link)


def test_the_invitee_sets_a_password_and_is_logged_in(invited: tuple[Invitation, str]) -> None:
    invitation, path = invited
    client = Client()
    page = client.get(path)
    assert page.status_code == 200
    text = page.content.decode()
    assert "Northwind" in text
    assert "sam@example.com" in text
    assert "Viewer" in text
    assert 'value="sam"' in text  # the username the admin proposed
    assert page["Referrer-Policy"] == "same-origin"

    mismatch = client.post(path, {"username": "sam", "password1": PASSWORD, "password2": "x"})
    assert mismatch.status_code == 400
    assert "The two passwords differ" in mismatch.content.decode()
    weak = client.post(path, {"username": "sam", "password1": "12345678", "password2": "12345678"})
    assert weak.status_code == 400
    assert "too common" in weak.content.decode()

    done = client.post(
        path, {"username": "sam", "password1": PASSWORD, "password2": PASSWORD}, follow=True
    )
    assert done.redirect_chain[0][0] == "/admin/"
    assert "Welcome to Northwind" in done.content.decode()
    user = done.context["request"].user
    assert user.username == "sam"
    assert user.check_password(PASSWORD)
    assert membership_of(user).role == Role.VIEWER  # type: ignore[union-attr]
    assert fetch_invitation(invitation.pk).accepted_by_id == user.pk

    used = Client().get(path)
    assert used.status_code == 410
    assert "already been accepted" in used.content.decode()
    # django-axes' backend counts logins per request: the test client's login passes one.
    assert Client().login(request=HttpRequest(), username="sam", password=PASSWORD)


def test_a_login_of_the_address_logs_in_to_join(invited: tuple[Invitation, str]) -> None:
    invitation, path = invited
    existing = UserFactory.create(username="sam-old", email="SAM@example.com")
    client = Client()
    page = client.get(path).content.decode()
    assert "already has an AgentDesk login" in page
    assert 'name="password1"' not in page
    wrong = client.post(path, {"username": "sam-old", "password": "nope"})
    assert wrong.status_code == 400
    assert "do not match a login" in wrong.content.decode()
    other = UserFactory.create(username="someone", email="someone@example.com")
    not_theirs = client.post(path, {"username": other.username, "password": "pw-for-tests"})
    assert "not the one the invitation was sent to" in not_theirs.content.decode()
    joined = client.post(path, {"username": "sam-old", "password": "pw-for-tests"})
    assert joined.status_code == 302
    assert membership_of(existing).agency_id == invitation.agency_id  # type: ignore[union-attr]


@pytest.mark.parametrize("state", ["revoked", "expired"])
def test_revoked_and_expired_links_open_nothing(
    invited: tuple[Invitation, str], state: str
) -> None:
    invitation, path = invited
    change = (
        {"revoked_at": timezone.now()}
        if state == "revoked"
        else {"expires_at": timezone.now() - datetime.timedelta(seconds=1)}
    )
    with tenancy.platform_context():
        Invitation.objects.filter(pk=invitation.pk).update(**change)
    page = Client().get(path)
    assert page.status_code == 410
    assert state in page.content.decode().lower() or "withdrawn" in page.content.decode()
    posted = Client().post(path, {"username": "sam", "password1": PASSWORD, "password2": PASSWORD})
    assert posted.status_code == 410
    assert fetch_invitation(invitation.pk).accepted_at is None


def test_a_made_up_link_is_a_404(db: None) -> None:
    page = Client().get("/invitations/not-a-real-token/")
    assert page.status_code == 404
    assert "not valid" in page.content.decode()
    assert Client().get("/invitations/" + "x" * 300 + "/").status_code == 404


def test_a_member_of_another_agency_cannot_join_with_their_login(
    invited: tuple[Invitation, str],
) -> None:
    _invitation, path = invited
    MembershipFactory.create(user__username="busy", user__email="sam@example.com")
    refused = Client().post(path, {"username": "busy", "password": "pw-for-tests"})
    assert refused.status_code == 400
    assert "already belongs to an agency" in refused.content.decode()


def test_the_lookup_shows_only_the_row_of_the_token(invited: tuple[Invitation, str]) -> None:
    """Raw SQL on the runtime role: with no tenant, the token's setting shows its one row."""
    invitation, _path = invited
    other = invite(AgencyFactory.create(), "other@example.com")
    with tenancy.tenant_context(), connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM members_invitation")
        assert cursor.fetchone() == (0,)
    with invitation_lookup_context(invitation.token_hash), connection.cursor() as cursor:
        cursor.execute("SELECT id FROM members_invitation")
        assert [row[0] for row in cursor.fetchall()] == [invitation.pk]
        cursor.execute("UPDATE members_invitation SET role = 'admin'")
        assert cursor.rowcount == 0  # read-only: writes need the agency
    with invitation_lookup_context(hash_token("made-up")), connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM members_invitation")
        assert cursor.fetchone() == (0,)
    assert other.pk != invitation.pk
