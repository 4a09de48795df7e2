"""Who a verified sign-in is (sso.services.sso_login_user): a new address in an allowed domain
becomes a member with the provider's role, once; a provider never signs in a member of another
agency, a superuser, an unverified address or one outside its domains."""

from __future__ import annotations

import pytest

from core import tenancy
from core.models import Agency, Membership, Role, User
from sso.models import SsoIdentity, SsoProvider
from sso.services import SsoRefused, sso_login_user
from tests.factories import MembershipFactory, UserFactory
from tests.sso.helpers import agency_with_sso

pytestmark = pytest.mark.django_db


def _provider(role: str = Role.APPROVER) -> SsoProvider:
    return agency_with_sso(
        issuer="https://login.example.com",
        client_id="agentdesk",
        client_secret="s3cret-value",
        domains=["acme.test"],
        role=role,
    )[1]


def _claims(email: str = "ann@acme.test", sub: str = "sub-ann", **more: object) -> dict:
    return {"sub": sub, "email": email, "email_verified": True, **more}


def test_a_first_sign_in_creates_the_user_and_a_membership_with_the_role() -> None:
    provider = _provider(role=Role.APPROVER)
    user = sso_login_user(provider=provider, claims=_claims())
    assert (user.username, user.email, user.is_staff) == ("ann@acme.test", "ann@acme.test", True)
    assert not user.has_usable_password()
    with tenancy.agency_context(provider.agency_id):
        membership = Membership.objects.get(user=user)
        assert (membership.agency_id, membership.role) == (provider.agency_id, Role.APPROVER)
        assert SsoIdentity.objects.get(provider=provider).user == user


def test_a_second_sign_in_is_the_same_user_by_subject_even_with_a_new_address() -> None:
    provider = _provider()
    first = sso_login_user(provider=provider, claims=_claims())
    again = sso_login_user(provider=provider, claims=_claims(email="ann.b@acme.test"))
    assert again.pk == first.pk
    assert User.objects.filter(email__iendswith="@acme.test").count() == 1
    with tenancy.agency_context(provider.agency_id):
        assert SsoIdentity.objects.filter(provider=provider).count() == 1


def test_an_existing_member_of_the_agency_is_linked_by_address() -> None:
    provider = _provider()
    member = MembershipFactory.create(
        agency_id=provider.agency_id, user=UserFactory.create(email="Bo@acme.test")
    ).user
    assert sso_login_user(provider=provider, claims=_claims(email="bo@acme.test")).pk == member.pk


@pytest.mark.parametrize(
    ("claims", "reason"),
    [
        (_claims(email="ann@elsewhere.test"), "not one of this agency's allowed domains"),
        (_claims(email_verified=False), "has not verified"),
        (_claims(email=""), "sent no e-mail address"),
        (_claims(sub=""), "names no subject"),
    ],
)
def test_a_sign_in_outside_the_rules_is_refused_and_creates_nothing(
    claims: dict, reason: str
) -> None:
    provider = _provider()
    with pytest.raises(SsoRefused, match=reason):
        sso_login_user(provider=provider, claims=claims)
    assert not User.objects.filter(email__iendswith="@acme.test").exists()


def test_a_member_of_another_agency_is_refused_and_gets_no_membership(agency: Agency) -> None:
    provider = _provider(role=Role.ADMIN)
    carol = MembershipFactory.create(
        agency=agency, role=Role.VIEWER, user=UserFactory.create(email="carol@acme.test")
    ).user
    with pytest.raises(SsoRefused, match="is not a member of this agency"):
        sso_login_user(provider=provider, claims=_claims(email="carol@acme.test", sub="c"))
    with tenancy.platform_context():
        assert list(Membership.objects.filter(user=carol).values_list("agency_id", "role")) == [
            (agency.id, Role.VIEWER)
        ]
        assert not SsoIdentity.objects.exists()


def test_a_superuser_is_never_signed_in_by_a_provider() -> None:
    provider = _provider()
    User.objects.create_superuser("root-sso", "root@acme.test", "pw")
    with pytest.raises(SsoRefused, match="superuser"):
        sso_login_user(provider=provider, claims=_claims(email="root@acme.test"))


def test_a_user_removed_from_the_agency_is_not_let_back_in_by_the_provider() -> None:
    provider = _provider()
    user = sso_login_user(provider=provider, claims=_claims())
    with tenancy.agency_context(provider.agency_id):
        Membership.objects.filter(user=user).delete()
    with pytest.raises(SsoRefused, match="is not a member of this agency"):
        sso_login_user(provider=provider, claims=_claims())
