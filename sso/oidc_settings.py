"""mozilla-django-oidc's settings for the sign-in, fixed here rather than in Django's settings:
they are how the product works, not an operator's choice (the provider is per agency)."""

from __future__ import annotations

from typing import Any

from mozilla_django_oidc.utils import import_from_settings

FIXED: dict[str, Any] = {
    "OIDC_AUTHENTICATION_CALLBACK_URL": "sso:callback",
    "OIDC_RP_SCOPES": "openid email profile",
    "OIDC_USE_NONCE": True,
    "OIDC_USE_PKCE": True,
    "OIDC_PKCE_CODE_CHALLENGE_METHOD": "S256",
    "OIDC_PKCE_CODE_VERIFIER_SIZE": 64,
    "OIDC_STATE_SIZE": 32,
    "OIDC_NONCE_SIZE": 32,
    "OIDC_MAX_STATES": 10,
    "OIDC_REDIRECT_FIELD_NAME": "next",
    "OIDC_STORE_ACCESS_TOKEN": False,
    "OIDC_STORE_ID_TOKEN": False,
    "LOGIN_REDIRECT_URL": "admin:index",
}


def get_setting(attr: str, *args: Any) -> Any:
    if attr in FIXED:
        return FIXED[attr]
    return import_from_settings(attr, *args)
