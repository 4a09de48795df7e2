"""Single sign-on end to end in Chromium, against a real OpenID Connect provider run in a second
process (django-oauth-toolkit, RS256 key made at its start: tests/sso/provider/): a first sign-in
creates the user and their membership with the configured role, a second reuses the user; an ID
token for another audience, expired, or from another issuer is refused, and so is a state the
browser was not given; a member of agency A cannot enter agency B through B's provider."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import Browser, Page, expect

from core import tenancy
from core.models import Membership, Role, User
from sso.models import SsoIdentity, SsoProvider
from tests.browser.conftest import DESKTOP, look_at_both_widths
from tests.factories import AgencyFactory, MembershipFactory, UserFactory
from tests.processes import AsgiServer
from tests.sso.helpers import agency_with_sso
from tests.sso.provider.process import PASSWORD, OidcProvider

pytestmark = pytest.mark.slow
RUN = uuid.uuid4().hex[:6]
ALICE = f"alice@bcorp-{RUN}.test"  # signs in to agency B
CAROL = f"carol@shared-{RUN}.test"  # a member of agency A
ERIN = f"erin@faults-{RUN}.test"  # meets the faulty clients


@pytest.fixture(scope="module")
def provider(asgi_server: AsgiServer) -> Iterator[OidcProvider]:
    users = {"alice": ALICE, "carol": CAROL, "erin": ERIN}
    running = OidcProvider(redirect_uri=f"{asgi_server.url}/sso/callback/", users=users).start()
    yield running
    running.stop()


def _sso(provider: OidcProvider, client: str, domain: str, **options: Any) -> SsoProvider:
    client_id, secret = provider.client(client)
    return agency_with_sso(
        issuer=provider.issuer, client_id=client_id, client_secret=secret, domains=[domain],
        **options,
    )[1]  # fmt: skip


def _sign_in(page: Page, server: AsgiServer, sso: SsoProvider, username: str) -> None:
    """From the admin's login page: the sign-in name, the agency's button, the provider's form
    (when the browser has no provider session yet)."""
    page.goto(f"{server.url}/admin/login/")
    page.fill("#sso-agency", sso.slug)
    page.locator("#sso-find button[type=submit]").click()
    page.get_by_role("link", name=f"Sign in with {sso.display_name}").click()
    if page.locator("#id_username").count():
        page.fill("#id_username", username)
        page.fill("#id_password", PASSWORD)
        page.get_by_role("button", name="Sign in to the provider").click()
    page.wait_for_load_state()


def test_first_sign_in_makes_a_member_with_the_role_and_the_second_reuses_the_user(
    browser: Browser, asgi_server: AsgiServer, provider: OidcProvider, live_db: Any
) -> None:
    sso = _sso(provider, "ok", ALICE.split("@")[1], name="B Corp", role=Role.STAFF)
    context = browser.new_context(viewport=DESKTOP)
    page = context.new_page()
    page.goto(f"{asgi_server.url}/admin/login/")
    expect(page.get_by_placeholder("Your agency's sign-in name")).to_be_visible()
    look_at_both_widths(page, "sso-login-page")
    page.goto(f"{asgi_server.url}/sso/{sso.slug}/")
    expect(page.get_by_role("link", name="Sign in with B Corp Login")).to_be_visible()
    look_at_both_widths(page, "sso-entry")
    _sign_in(page, asgi_server, sso, "alice")
    assert page.url.startswith(f"{asgi_server.url}/admin/"), page.content()[:2000]
    expect(page.locator("#sso-refused")).to_have_count(0)
    user = User.objects.get(email=ALICE)
    assert user.is_staff
    assert not user.has_usable_password()
    assert user.last_login is not None  # user_logged_in was sent (auth.login): the audit log's
    with tenancy.agency_context(sso.agency_id):
        membership = Membership.objects.get(user=user)
        assert (membership.agency_id, membership.role) == (sso.agency_id, Role.STAFF)
        assert SsoIdentity.objects.filter(provider=sso, user=user).count() == 1
    context.close()

    again = browser.new_context(viewport=DESKTOP)  # no session here, nor at the provider
    page = again.new_page()
    _sign_in(page, asgi_server, sso, "alice")
    assert page.url.startswith(f"{asgi_server.url}/admin/"), page.content()[:2000]
    assert list(User.objects.filter(email=ALICE).values_list("pk", flat=True)) == [user.pk]
    with tenancy.agency_context(sso.agency_id):
        assert Membership.objects.filter(agency_id=sso.agency_id).count() == 1
        assert SsoIdentity.objects.filter(provider=sso).count() == 1
    again.close()


@pytest.mark.parametrize(
    ("client", "reason"),
    [
        ("wrong-aud", "not meant for this client"),
        ("expired", "has expired"),
        ("wrong-iss", "comes from another issuer"),
    ],
)
def test_an_id_token_for_another_audience_expired_or_from_another_issuer_is_refused(  # noqa: PLR0917 - the parameters
    browser: Browser,
    asgi_server: AsgiServer,
    provider: OidcProvider,
    live_db: Any,
    client: str,
    reason: str,
) -> None:
    sso = _sso(provider, client, ERIN.split("@")[1], name="Faults")
    context = browser.new_context(viewport=DESKTOP)
    page = context.new_page()
    _sign_in(page, asgi_server, sso, "erin")
    expect(page.locator("#sso-refused")).to_contain_text(reason)
    assert not User.objects.filter(email=ERIN).exists()
    page.goto(f"{asgi_server.url}/admin/")
    assert "/admin/login/" in page.url  # not logged in
    context.close()


def test_a_state_the_browser_was_not_given_is_refused(
    browser: Browser, asgi_server: AsgiServer, provider: OidcProvider, live_db: Any
) -> None:
    sso = _sso(provider, "ok", ERIN.split("@")[1], name="State")
    # One browser starts a sign-in: the provider's login page carries its state.
    starter = browser.new_context(viewport=DESKTOP)
    page = starter.new_page()
    page.goto(f"{asgi_server.url}/sso/{sso.slug}/")
    page.get_by_role("link", name=f"Sign in with {sso.display_name}").click()
    expect(page.locator("#id_username")).to_be_visible()
    authorize = parse_qs(urlsplit(page.url).query)["next"][0]
    state = parse_qs(urlsplit(authorize).query)["state"][0]
    # Another browser is sent back with it (a forged login): this session never issued it.
    other = browser.new_context(viewport=DESKTOP)
    page = other.new_page()
    page.goto(f"{asgi_server.url}/sso/callback/?code=made-up&state={state}")
    expect(page.locator("#sso-refused")).to_contain_text("the state does not match")
    look_at_both_widths(page, "sso-refused")
    page.goto(f"{asgi_server.url}/admin/")
    assert "/admin/login/" in page.url
    assert not User.objects.filter(email=ERIN).exists()
    starter.close()
    other.close()


def test_a_member_of_agency_a_cannot_enter_agency_b_through_bs_provider(
    browser: Browser, asgi_server: AsgiServer, provider: OidcProvider, live_db: Any
) -> None:
    agency_a = AgencyFactory.create(slug=f"a-{uuid.uuid4().hex[:6]}")
    carol = MembershipFactory.create(
        agency=agency_a,
        role=Role.ADMIN,
        user=UserFactory.create(username=f"carol-{RUN}", email=CAROL),
    ).user
    sso_b = _sso(provider, "ok", CAROL.split("@")[1], name="Agency B", role=Role.ADMIN)
    context = browser.new_context(viewport=DESKTOP)
    page = context.new_page()
    _sign_in(page, asgi_server, sso_b, "carol")
    expect(page.locator("#sso-refused")).to_contain_text("is not a member of this agency")
    with tenancy.agency_context(sso_b.agency_id):
        assert not Membership.objects.filter(agency_id=sso_b.agency_id).exists()
        assert not SsoIdentity.objects.exists()
    with tenancy.agency_context(agency_a.id):
        assert Membership.objects.get(user=carol).role == Role.ADMIN
    context.close()
