"""The sign-in's own requests: the redirect to the provider carries state, nonce and a PKCE
S256 challenge of the verifier kept in the session; a callback with a state this session was not
given is refused and counted as a failed login; an agency can keep its members to single sign-on
(their password refused; a superuser's never)."""

from __future__ import annotations

import base64
import hashlib
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth.signals import user_login_failed
from django.test import Client

from core import tenancy
from core.models import Role, User
from sso.models import SsoProvider
from tests.factories import MembershipFactory, UserFactory
from tests.sso.helpers import agency_with_sso
from tests.sso.stub import discovery, stub_issuer

pytestmark = pytest.mark.django_db
DISCOVERY = "/o/.well-known/openid-configuration"


def test_the_redirect_to_the_provider_carries_state_nonce_and_an_s256_challenge() -> None:
    documents: dict[str, Any] = {}
    with stub_issuer(documents) as base:
        documents[DISCOVERY] = discovery(base + "/o")
        _agency, provider = agency_with_sso(
            issuer=base + "/o", client_id="cid", client_secret="s", domains=["a.test"]
        )
        client = Client()
        response = client.get(f"/sso/{provider.slug}/login/")
    assert response.status_code == 302
    target = urlsplit(response["Location"])
    assert f"{target.scheme}://{target.netloc}{target.path}" == f"{base}/o/authorize/"
    query = {k: v[0] for k, v in parse_qs(target.query).items()}
    assert query["response_type"] == "code"
    assert query["client_id"] == "cid"
    assert query["redirect_uri"] == "http://testserver/sso/callback/"
    assert query["scope"] == "openid email profile"
    assert query["code_challenge_method"] == "S256"
    issued = client.session["oidc_states"][query["state"]]
    assert issued["nonce"] == query["nonce"]
    assert issued["sso_slug"] == provider.slug
    digest = hashlib.sha256(issued["code_verifier"].encode()).digest()
    assert query["code_challenge"] == base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def test_a_callback_with_a_state_this_session_was_not_given_is_refused() -> None:
    failed: list[dict[str, Any]] = []

    def record(sender: Any, credentials: dict[str, Any], **kwargs: Any) -> None:
        failed.append(credentials)

    user_login_failed.connect(record)
    try:
        response = Client().get("/sso/callback/?code=stolen&state=not-mine")
    finally:
        user_login_failed.disconnect(record)
    assert response.status_code == 400
    assert "the state does not match" in response.content.decode()
    assert len(failed) == 1


def test_unknown_or_disabled_sign_in_names_are_404s() -> None:
    _agency, provider = agency_with_sso(
        issuer="https://x.example", client_id="c", client_secret="s", domains=["x.test"]
    )
    client = Client()
    assert client.get(f"/sso/{provider.slug}/").status_code == 200
    assert client.get("/sso/no-such-agency/").status_code == 404
    assert client.get(f"/sso/?agency={provider.slug}")["Location"] == f"/sso/{provider.slug}/"
    assert client.get("/sso/?agency=no-such-agency")["Location"] == "/admin/login/"
    with tenancy.agency_context(provider.agency_id):
        SsoProvider.objects.filter(pk=provider.pk).update(is_enabled=False)
    assert client.get(f"/sso/{provider.slug}/").status_code == 404
    assert client.get(f"/sso/{provider.slug}/login/").status_code == 404


@pytest.mark.parametrize("allowed", [True, False])
def test_an_agency_can_keep_its_members_to_single_sign_on(allowed: bool) -> None:
    agency, _provider = agency_with_sso(
        issuer="https://x.example",
        client_id="c",
        client_secret="s",
        domains=["x.test"],
        password_login_allowed=allowed,
    )
    user = MembershipFactory.create(agency=agency, role=Role.ADMIN).user
    response = Client().post(
        "/admin/login/", {"username": user.username, "password": "pw-for-tests"}
    )
    assert response.status_code == (302 if allowed else 200)
    root = User.objects.create_superuser("root-pw", "root@x.test", "root-pw-42")
    assert (
        Client()
        .post("/admin/login/", {"username": root.username, "password": "root-pw-42"})
        .status_code
        == 302
    )
    loose = UserFactory.create()  # no agency: nothing to refuse
    assert (
        Client()
        .post("/admin/login/", {"username": loose.username, "password": "pw-for-tests"})
        .status_code
        == 302
    )
