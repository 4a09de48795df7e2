"""Single sign-on in the admin: an agency admin sets up the provider; the client secret is stored
encrypted, never shown again, kept when left blank and asked again when the issuer changes;
staff do not see the page, another agency's provider is a 404; the sign-in lookup shows exactly
one provider."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from core import tenancy
from core.models import Agency, Role, User
from sso.models import SsoProvider
from sso.selectors import enabled_provider, provider_lookup_context
from tests.admin.conftest import member
from tests.admin.helpers import admin_url, change_url
from tests.sso.helpers import agency_with_sso

pytestmark = pytest.mark.django_db
SECRET = "client-secret-never-shown-9f8e7d"


def _form(**changes: Any) -> dict[str, Any]:
    return {
        "display_name": "Acme Okta",
        "slug": "acme",
        "is_enabled": "on",
        "issuer": "https://acme.okta.example/oauth2/default",
        "client_id": "agentdesk-client",
        "client_secret": SECRET,
        "allowed_domains": "acme.test, Acme-Mail.test",
        "new_member_role": Role.STAFF,
        "password_login_allowed": "on",
        **changes,
    }


def test_an_agency_admin_sets_up_sso_and_the_secret_is_never_shown_again(
    agency: Agency, login: Callable[[User], Client]
) -> None:
    client = login(member(agency, Role.ADMIN))
    response = client.post(admin_url(SsoProvider, "add"), _form())
    assert response.status_code == 302, response.content.decode()[:3000]
    with tenancy.agency_context(agency.id):
        provider = SsoProvider.objects.get()
    assert provider.agency_id == agency.id
    assert provider.allowed_domains == ["acme.test", "acme-mail.test"]
    assert SECRET not in provider.client_secret_encrypted
    assert provider.get_client_secret() == SECRET
    page = client.get(change_url(provider)).content.decode()
    assert SECRET not in page
    assert SECRET not in client.get(admin_url(SsoProvider, "changelist")).content.decode()

    kept = client.post(change_url(provider), _form(client_secret="", display_name="Acme SSO"))
    assert kept.status_code == 302
    with tenancy.agency_context(agency.id):
        provider.refresh_from_db()
    assert (provider.display_name, provider.get_client_secret()) == ("Acme SSO", SECRET)

    moved = client.post(change_url(provider), _form(client_secret="", issuer="https://evil.test"))
    assert moved.status_code == 200
    assert "enter the client secret again" in moved.content.decode()
    with tenancy.agency_context(agency.id):
        provider.refresh_from_db()
    assert provider.issuer == "https://acme.okta.example/oauth2/default"


def test_a_provider_needs_a_domain(agency: Agency, login: Callable[[User], Client]) -> None:
    client = login(member(agency, Role.ADMIN))
    response = client.post(admin_url(SsoProvider, "add"), _form(allowed_domains=""))
    assert response.status_code == 200
    with tenancy.agency_context(agency.id):
        assert not SsoProvider.objects.exists()


def test_staff_do_not_see_sso_and_another_agencys_provider_is_a_404(
    agency: Agency, login: Callable[[User], Client]
) -> None:
    _other, provider = agency_with_sso(
        issuer="https://x.example", client_id="c", client_secret=SECRET, domains=["x.test"]
    )
    assert (
        login(member(agency, Role.STAFF)).get(admin_url(SsoProvider, "changelist")).status_code
        == 403
    )
    admin = login(member(agency, Role.ADMIN))
    assert admin.get(change_url(provider)).status_code == 404
    assert (
        provider.display_name
        not in admin.get(admin_url(SsoProvider, "changelist")).content.decode()
    )


def test_the_sign_in_lookup_shows_exactly_the_provider_of_its_sign_in_name() -> None:
    _a, first = agency_with_sso(
        issuer="https://a.example", client_id="a", client_secret="s", domains=["a.test"]
    )
    _b, second = agency_with_sso(
        issuer="https://b.example", client_id="b", client_secret="s", domains=["b.test"]
    )
    with provider_lookup_context(first.slug):
        assert list(SsoProvider.objects.values_list("pk", flat=True)) == [first.pk]
    with tenancy.tenant_context():
        assert not SsoProvider.objects.exists()
    with tenancy.agency_context(second.agency_id):
        assert list(SsoProvider.objects.values_list("pk", flat=True)) == [second.pk]
    assert enabled_provider(slug=second.slug) == second
    with tenancy.agency_context(second.agency_id):
        SsoProvider.objects.filter(pk=second.pk).update(is_enabled=False)
    assert enabled_provider(slug=second.slug) is None
