"""core.crypto: Fernet keys from the environment, a derived development key, rotation."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured
from pytest_django.fixtures import Settings

from core import crypto

REPO = Path(__file__).resolve().parents[2]


def test_round_trip_and_the_token_hides_the_plaintext(settings: Settings) -> None:
    settings.AGENTDESK_ENCRYPTION_KEYS = [Fernet.generate_key().decode()]
    token = crypto.encrypt("sk-live-secret")
    assert "sk-live-secret" not in token
    assert crypto.decrypt(token) == "sk-live-secret"
    assert crypto.encrypt("sk-live-secret") != token  # a fresh IV every time


def test_without_keys_a_stable_key_is_derived_from_secret_key(settings: Settings) -> None:
    settings.AGENTDESK_ENCRYPTION_KEYS = []
    token = crypto.encrypt("dev-secret")
    assert crypto.configured_keys() == (crypto.derived_key(),)
    assert Fernet(crypto.derived_key(settings.SECRET_KEY)).decrypt(token.encode()) == b"dev-secret"
    settings.SECRET_KEY = "another-secret-key"
    with pytest.raises(crypto.DecryptionError):
        crypto.decrypt(token)


def test_old_keys_decrypt_and_rotate_moves_to_the_primary(settings: Settings) -> None:
    old, new = Fernet.generate_key(), Fernet.generate_key()
    settings.AGENTDESK_ENCRYPTION_KEYS = [old.decode()]
    token = crypto.encrypt("sk-rotate-me")
    settings.AGENTDESK_ENCRYPTION_KEYS = [new.decode(), old.decode()]
    assert crypto.decrypt(token) == "sk-rotate-me"
    assert not crypto.is_primary(token)
    rotated = crypto.rotate(token)
    assert crypto.is_primary(rotated)
    assert Fernet(new).decrypt(rotated.encode()) == b"sk-rotate-me"
    settings.AGENTDESK_ENCRYPTION_KEYS = [new.decode()]
    with pytest.raises(crypto.DecryptionError):
        crypto.decrypt(token)
    assert crypto.decrypt(rotated) == "sk-rotate-me"


def test_a_malformed_key_is_a_configuration_error(settings: Settings) -> None:
    settings.AGENTDESK_ENCRYPTION_KEYS = ["not-a-fernet-key"]
    with pytest.raises(ImproperlyConfigured, match="AGENTDESK_ENCRYPTION_KEYS"):
        crypto.encrypt("x")


@pytest.mark.parametrize(("keys", "starts"), [(None, False), ("", False), ("k1,k2", True)])
def test_production_settings_require_encryption_keys(keys: str | None, starts: bool) -> None:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"AGENTDESK_ENCRYPTION_KEYS", "DJANGO_SETTINGS_MODULE"}
    }
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings.production",
        DJANGO_SECRET_KEY="test",
        DJANGO_ALLOWED_HOSTS="example.com",
        # Set URLs so that loading settings does not start the embedded servers.
        DATABASE_URL="postgres://x@127.0.0.1:1/x",
        REDIS_URL="redis://127.0.0.1:1/0",
    )
    if keys is not None:
        env["AGENTDESK_ENCRYPTION_KEYS"] = keys
    result = subprocess.run(
        [sys.executable, "-c", "from django.conf import settings; settings.SECRET_KEY"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (result.returncode == 0) is starts, result.stderr
    if not starts:
        assert "AGENTDESK_ENCRYPTION_KEYS" in result.stderr
