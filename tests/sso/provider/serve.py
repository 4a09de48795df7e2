"""Run the test provider: ``python -m tests.sso.provider.serve SPEC.json``.

SPEC (written by tests/sso/conftest.py): ``data`` (a folder), ``port``, ``users`` (username,
password, email) and ``clients`` (name, client_id, client_secret, redirect_uri). Makes the RS256
key and the sqlite database in ``data``, creates the users and clients, then serves on
127.0.0.1:port until killed.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa


def main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    data = Path(spec["data"])
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (data / "rsa.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    os.environ.update(
        DJANGO_SETTINGS_MODULE="tests.sso.provider.settings",
        SSO_PROVIDER_DATA=str(data),
        SSO_PROVIDER_PORT=str(spec["port"]),
        SSO_PROVIDER_SECRET_KEY=secrets.token_urlsafe(32),
        # oauthlib refuses plain http unless told: the provider is on loopback only.
        OAUTHLIB_INSECURE_TRANSPORT="1",
    )
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.core.servers.basehttp import run
    from django.core.wsgi import get_wsgi_application
    from oauth2_provider.models import Application

    call_command("migrate", interactive=False, verbosity=0)
    for user in spec["users"]:
        User.objects.create_user(user["username"], email=user["email"], password=user["password"])
    for client in spec["clients"]:
        Application.objects.create(
            name=client["name"],
            client_id=client["client_id"],
            client_secret=client["client_secret"],
            client_type=Application.CLIENT_CONFIDENTIAL,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris=client["redirect_uri"],
            algorithm=Application.RS256_ALGORITHM,
            skip_authorization=True,
        )
    run("127.0.0.1", spec["port"], get_wsgi_application(), threading=True)


if __name__ == "__main__":
    main(sys.argv[1])
