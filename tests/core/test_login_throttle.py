"""Guessing passwords on the admin's login page (django-axes, core/login_throttle.py): failures
count per account and per client address; past the limit even the right password is refused with
a readable 429 page until the cool-off ends or an admin unlocks."""

from __future__ import annotations

import datetime
import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from axes.models import AccessAttempt
from django.core.management import call_command
from django.test import Client, override_settings
from django.urls import reverse

from core.models import Role, User
from tests.factories import MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db

LOGIN = "/admin/login/"
PASSWORD = "pw-for-tests"  # UserFactory's
LIMIT = 3
_addresses = itertools.count(1)


@pytest.fixture(autouse=True)
def low_limit() -> Iterator[None]:
    with override_settings(AXES_FAILURE_LIMIT=LIMIT):
        yield


def address() -> str:
    """A client address of this test's own (the attempts table is shared by the test run)."""
    n = next(_addresses)
    return f"10.25.{n // 250}.{n % 250 + 1}"


def member() -> User:
    return MembershipFactory.create().user


def attempt(username: str, password: str, *, client_address: str) -> Any:
    return Client(REMOTE_ADDR=client_address).post(
        LOGIN, {"username": username, "password": password, "next": "/admin/"}
    )


def logged_in(response: Any) -> bool:
    return response.status_code == 302 and "_auth_user_id" in response.client.session


def assert_locked_out(response: Any) -> None:
    assert response.status_code == 429, response.status_code
    page = response.content.decode()
    assert 'id="login-locked-out"' in page  # the page in the admin's look, not a bare text
    assert "too many failed attempts" in page
    assert "Back to the login page" in page
    retry_after = int(response["Retry-After"])
    assert 0 < retry_after <= 15 * 60  # the default cool-off, counted from the last failure
    assert "_auth_user_id" not in response.client.session


def test_the_right_password_logs_in_below_the_limit() -> None:
    user = member()
    for _ in range(LIMIT - 1):
        assert attempt(user.username, "wrong", client_address=address()).status_code == 200

    assert logged_in(attempt(user.username, PASSWORD, client_address=address()))


def test_an_account_with_too_many_failures_is_locked_from_every_address() -> None:
    user = member()
    for n in range(LIMIT):
        response = attempt(user.username, f"guess-{n}", client_address=address())
    assert_locked_out(response)  # the failure that reaches the limit already says so

    assert_locked_out(attempt(user.username, PASSWORD, client_address=address()))
    # Other accounts are not affected.
    assert logged_in(attempt(member().username, PASSWORD, client_address=address()))


def test_an_address_with_too_many_failures_is_locked_for_every_account() -> None:
    guesser = address()
    for n in range(LIMIT):
        attempt(f"nobody-{n}", "guess", client_address=guesser)
    user = member()

    assert_locked_out(attempt(user.username, PASSWORD, client_address=guesser))
    # The same account from another address logs in.
    assert logged_in(attempt(user.username, PASSWORD, client_address=address()))


def test_the_lock_ends_with_the_cool_off() -> None:
    user = member()
    for _ in range(LIMIT):
        attempt(user.username, "wrong", client_address=address())
    past = datetime.timedelta(minutes=15, seconds=1)
    AccessAttempt.objects.filter(username=user.username).update(
        attempt_time=datetime.datetime.now(tz=datetime.UTC) - past
    )

    assert logged_in(attempt(user.username, PASSWORD, client_address=address()))


def test_a_refused_try_during_the_lock_does_not_extend_it() -> None:
    user = member()
    for _ in range(LIMIT):
        attempt(user.username, "wrong", client_address=address())
    before = list(
        AccessAttempt.objects.filter(username=user.username).values_list("pk", "attempt_time")
    )

    assert_locked_out(attempt(user.username, "wrong again", client_address=address()))

    after = list(
        AccessAttempt.objects.filter(username=user.username).values_list("pk", "attempt_time")
    )
    assert after == before


def test_the_reset_command_unlocks_an_account() -> None:
    user = member()
    for _ in range(LIMIT):
        attempt(user.username, "wrong", client_address=address())
    assert_locked_out(attempt(user.username, PASSWORD, client_address=address()))

    call_command("axes_reset_username", user.username)

    assert logged_in(attempt(user.username, PASSWORD, client_address=address()))


def test_a_superuser_unlocks_from_the_admin() -> None:
    user = member()
    for _ in range(LIMIT):
        attempt(user.username, "wrong", client_address=address())
    admin = UserFactory.create(is_superuser=True)
    client = Client()
    client.force_login(admin)
    changelist = reverse("admin:axes_accessattempt_changelist")
    listed = client.get(changelist)
    assert listed.status_code == 200
    assert user.username in listed.content.decode()
    rows = AccessAttempt.objects.filter(username=user.username).values_list("pk", flat=True)

    done = client.post(
        changelist, {"action": "unlock", "_selected_action": [str(pk) for pk in rows]}
    )

    assert done.status_code == 302
    assert not AccessAttempt.objects.filter(username=user.username).exists()
    assert logged_in(attempt(user.username, PASSWORD, client_address=address()))


def test_an_agency_admin_cannot_see_or_clear_the_lockouts() -> None:
    agency_admin = MembershipFactory.create(role=Role.ADMIN).user
    client = Client()
    client.force_login(agency_admin)

    assert client.get(reverse("admin:axes_accessattempt_changelist")).status_code == 403
