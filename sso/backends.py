"""Authentication backends: an agency's OpenID Connect provider, and passwords.

Both sit beside Django's ModelBackend (config/settings/base.py: AUTHENTICATION_BACKENDS).

:class:`AgencyOIDCBackend` is mozilla-django-oidc's backend with the provider taken from the
sign-in (sso.views puts it on the request), its endpoints from the issuer's discovery document,
every call to the issuer through :mod:`sso.issuer` (the private-address refusal), and the ID
token checked in full: signature with a key of the issuer's JWKS (RS256/ES256 only), ``iss``,
``aud`` (and ``azp`` when several audiences), ``exp``, ``iat`` and the nonce. Who the claims sign
in as is :func:`sso.services.sso_login_user`. A refusal is kept on the request for the page and
raised as ``PermissionDenied``, so Django sends ``user_login_failed`` (the audit log and the login
throttle see it) and tries no other backend.
"""

from __future__ import annotations

from typing import Any

import jwt
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from core.models import User
from sso import issuer
from sso.models import SsoProvider
from sso.oidc_settings import get_setting
from sso.selectors import password_login_refused
from sso.services import SsoRefused, sso_login_user

ALGORITHMS = ["RS256", "ES256"]
LEEWAY_SECONDS = 30  # clock skew between the issuer and us


class PasswordGate:
    """Stops a password login of a member of an agency whose provider is its only way in
    (``password_login_allowed`` off): ``PermissionDenied`` ends the backends' chain before
    Django's ModelBackend checks the password, and counts as a failed login. Anyone else passes
    on to ModelBackend; superusers always keep their password. Not a BaseBackend: without
    ``get_user`` it is never a session's backend (``force_login`` takes the first that has one)."""

    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> None:
        if username is None or password is None:
            return
        user = User.objects.filter(**{User.USERNAME_FIELD: username}).first()
        if user is not None and password_login_refused(user=user):
            raise PermissionDenied("This agency signs in with single sign-on only.")


class AgencyOIDCBackend(OIDCAuthenticationBackend):
    """Authenticates the SSO callback only: without ``request.sso_provider`` it returns None."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # The parent reads one provider from settings; ours comes with each sign-in.
        self.UserModel = User
        self.OIDC_RP_SIGN_ALGO = "RS256"

    get_settings = staticmethod(get_setting)

    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> User | None:
        provider: SsoProvider | None = getattr(request, "sso_provider", None)
        if request is None or provider is None or "nonce" not in kwargs:
            return None
        try:
            self.provider = provider
            self.endpoints = issuer.discover(provider.issuer)
            self.OIDC_OP_TOKEN_ENDPOINT = self.endpoints.token_endpoint
            self.OIDC_OP_JWKS_ENDPOINT = self.endpoints.jwks_uri
            self.OIDC_OP_USER_ENDPOINT = self.endpoints.userinfo_endpoint
            self.OIDC_RP_CLIENT_ID = provider.client_id
            self.OIDC_RP_CLIENT_SECRET = provider.get_client_secret()
            user: User | None = super().authenticate(request, **kwargs)
        except (SsoRefused, issuer.IssuerError) as exc:
            request.sso_refusal = str(exc)  # type: ignore[attr-defined]
            raise PermissionDenied(str(exc)) from exc
        return user

    # --- calls to the issuer --------------------------------------------------------------
    def get_token(self, payload: dict[str, str]) -> dict[str, Any]:
        # client_secret_basic, the method every provider supports; a public client sends its id.
        secret = payload.pop("client_secret", "")
        auth = (payload["client_id"], secret) if secret else None
        token = issuer.post_form(self.OIDC_OP_TOKEN_ENDPOINT, payload, auth=auth)
        if not isinstance(token, dict) or not token.get("id_token"):
            raise SsoRefused("The provider's token answer has no ID token.")
        return token

    def retrieve_matching_jwk(self, token: str) -> jwt.PyJWK:
        keys = issuer.get_json(self.OIDC_OP_JWKS_ENDPOINT)
        header = _header(token)
        candidates = [
            key
            for key in (keys.get("keys", []) if isinstance(keys, dict) else [])
            if isinstance(key, dict)
            and key.get("kid") == header.get("kid")
            and key.get("alg", header["alg"]) == header["alg"]
            and key.get("use", "sig") == "sig"
        ]
        if len(candidates) != 1:
            raise SsoRefused("No key of the provider's key set matches the ID token's.")
        try:
            return jwt.PyJWK(candidates[0])
        except jwt.PyJWTError as exc:
            raise SsoRefused(f"The provider's signing key cannot be used: {exc}") from None

    # --- the ID token ---------------------------------------------------------------------
    def verify_token(self, token: str, **kwargs: Any) -> dict[str, Any]:
        key = self.retrieve_matching_jwk(token)
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=ALGORITHMS,
                audience=self.OIDC_RP_CLIENT_ID,
                issuer=self.endpoints.issuer,
                leeway=LEEWAY_SECONDS,
                options={"require": ["iss", "aud", "exp", "iat", "sub"]},
            )
        except jwt.ExpiredSignatureError:
            raise SsoRefused("The provider's ID token has expired.") from None
        except jwt.InvalidAudienceError:
            raise SsoRefused("The provider's ID token is not meant for this client.") from None
        except jwt.InvalidIssuerError:
            raise SsoRefused("The provider's ID token comes from another issuer.") from None
        except jwt.PyJWTError as exc:
            raise SsoRefused(f"The provider's ID token is not valid: {exc}") from None
        audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
        if len(audiences) > 1 and claims.get("azp") != self.OIDC_RP_CLIENT_ID:
            raise SsoRefused("The provider's ID token names another authorized party.")
        if claims.get("nonce") != kwargs.get("nonce"):
            raise SsoRefused("The provider's ID token does not answer this sign-in (nonce).")
        return claims

    def get_or_create_user(self, access_token: str, id_token: str, payload: dict[str, Any]) -> User:
        claims = dict(payload)
        if not claims.get("email") and self.OIDC_OP_USER_ENDPOINT and access_token:
            # Some providers put the address in the userinfo answer only; same subject required.
            info = issuer.get_json(self.OIDC_OP_USER_ENDPOINT, bearer=access_token)
            if isinstance(info, dict) and info.get("sub") == claims["sub"]:
                claims.update({k: info[k] for k in ("email", "email_verified") if k in info})
        return sso_login_user(provider=self.provider, claims=claims)

    def get_user(self, user_id: int) -> User | None:
        try:
            return User.objects.get(pk=user_id)
        except User.DoesNotExist:
            return None


def _header(token: str) -> dict[str, Any]:
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError as exc:
        raise SsoRefused(f"The provider's ID token is not a JWT: {exc}") from None
    if header.get("alg") not in ALGORITHMS:
        raise SsoRefused(f"The ID token's algorithm {header.get('alg')!r} is not accepted.")
    return header
