"""Admin test fixtures: two agencies, logins of each role, a logged-in test client."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.test import Client

from core.models import Agency, Role, Site, User
from tests.factories import AgencyFactory, MembershipFactory, SiteFactory


@pytest.fixture
def agency() -> Agency:
    return AgencyFactory.create()


@pytest.fixture
def other_agency() -> Agency:
    return AgencyFactory.create()


@pytest.fixture
def site(agency: Agency) -> Site:
    return SiteFactory.create(agency=agency)


def member(agency: Agency, role: str) -> User:
    return MembershipFactory.create(agency=agency, role=role).user


@pytest.fixture
def staff(agency: Agency) -> User:
    return member(agency, Role.STAFF)


@pytest.fixture
def superuser(django_user_model: type[User]) -> User:
    return django_user_model.objects.create_superuser("root", "root@example.com", "pw")


@pytest.fixture
def login() -> Callable[[User], Client]:
    def make(user: User) -> Client:
        client = Client()
        client.force_login(user)
        return client

    return make
