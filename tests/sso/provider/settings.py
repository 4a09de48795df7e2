"""The test provider's Django settings (a project of its own, not AgentDesk's)."""

from __future__ import annotations

import os
from pathlib import Path

DATA = Path(os.environ["SSO_PROVIDER_DATA"])
PORT = int(os.environ["SSO_PROVIDER_PORT"])
ISSUER = f"http://127.0.0.1:{PORT}/o"

SECRET_KEY = os.environ["SSO_PROVIDER_SECRET_KEY"]
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1"]
ROOT_URLCONF = "tests.sso.provider.urls"
USE_TZ = True
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "oauth2_provider",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [Path(__file__).parent / "templates"],
        "OPTIONS": {"context_processors": ["django.template.context_processors.request"]},
    }
]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": DATA / "provider.db"}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# A cookie name of its own: AgentDesk's server is on the same host (cookies ignore ports).
SESSION_COOKIE_NAME = "provider_session"
CSRF_COOKIE_NAME = "provider_csrftoken"
LOGIN_URL = "/accounts/login/"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_RSA_PRIVATE_KEY": (DATA / "rsa.pem").read_text(),
    "OIDC_ISS_ENDPOINT": ISSUER,
    "PKCE_REQUIRED": True,
    "ALLOWED_REDIRECT_URI_SCHEMES": ["http"],
    "SCOPES": {"openid": "OpenID Connect", "email": "E-mail address", "profile": "Profile"},
    "OAUTH2_VALIDATOR_CLASS": "tests.sso.provider.validator.TestValidator",
}
