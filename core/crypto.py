"""Secrets at rest: Fernet tokens under keys from ``AGENTDESK_ENCRYPTION_KEYS``.

``AGENTDESK_ENCRYPTION_KEYS`` is a comma-separated list of Fernet keys (32 url-safe base64 bytes,
``python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"``).
The first key encrypts; every key decrypts (:class:`~cryptography.fernet.MultiFernet`), so a key is
rotated by putting a new key first, running ``manage.py rotate_encryption_keys`` (which re-encrypts
every stored secret with the first key) and then dropping the old key.

Development only: with the variable unset, one key is derived from ``SECRET_KEY`` (HKDF-SHA256), so
secrets survive restarts without any set-up. ``config/settings/production.py`` refuses to start
without the variable. To switch a development database to explicit keys, list
:func:`derived_key` second and rotate.

Stored secrets live in :class:`EncryptedTextField` columns; the field is only a marker (models
expose ``set_…()`` / ``get_…()`` pairs and never decrypt implicitly), which lets
:func:`secrets_rotate` find every secret without a hand-kept list.
"""

from __future__ import annotations

import base64
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.apps import apps
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import models

from core import tenancy

ENV_VAR = "AGENTDESK_ENCRYPTION_KEYS"


class DecryptionError(ValueError):
    """The stored value is not a token of any configured key (wrong keys, or tampered with)."""


class EncryptedTextField(models.TextField):
    """A text column that holds a Fernet token (or ``""``), never plaintext.

    A marker, not a transparent field: code encrypts and decrypts explicitly through this module,
    so a plaintext secret is never loaded by accident (querysets, admin, serializers, ``repr``).
    """

    description = "Fernet-encrypted text"


def derived_key(secret_key: str | None = None) -> bytes:
    """The development key: HKDF-SHA256 of ``SECRET_KEY`` (stable across restarts)."""
    secret = (secret_key if secret_key is not None else settings.SECRET_KEY).encode()
    raw = HKDF(
        algorithm=hashes.SHA256(), length=32, salt=None, info=b"agentdesk.encryption.v1"
    ).derive(secret)
    return base64.urlsafe_b64encode(raw)


def configured_keys() -> tuple[bytes, ...]:
    """The keys in order (primary first): from settings, else the one derived development key."""
    keys = tuple(
        key.strip().encode()
        for key in getattr(settings, "AGENTDESK_ENCRYPTION_KEYS", [])
        if key and key.strip()
    )
    return keys or (derived_key(),)


@lru_cache(maxsize=8)
def _multifernet(keys: tuple[bytes, ...]) -> MultiFernet:
    try:
        return MultiFernet([Fernet(key) for key in keys])
    except ValueError as exc:
        raise ImproperlyConfigured(
            f"{ENV_VAR} must be comma-separated Fernet keys (32 url-safe base64-encoded bytes)"
        ) from exc


def _fernet() -> MultiFernet:
    # Keyed on the current keys, so a settings change (tests, rotation) takes effect at once.
    return _multifernet(configured_keys())


def encrypt(plaintext: str) -> str:
    """A token of ``plaintext`` under the primary key."""
    return _fernet().encrypt(plaintext.encode()).decode()


def decrypt(token: str) -> str:
    """The plaintext of ``token``, decrypted with whichever configured key made it."""
    try:
        return _fernet().decrypt(token.encode()).decode()
    except InvalidToken:
        raise DecryptionError(f"the value cannot be decrypted with the keys in {ENV_VAR}") from None


def rotate(token: str) -> str:
    """``token`` re-encrypted under the primary key (made by any configured key)."""
    try:
        return _fernet().rotate(token.encode()).decode()
    except InvalidToken:
        raise DecryptionError(f"the value cannot be decrypted with the keys in {ENV_VAR}") from None


def is_primary(token: str) -> bool:
    """Whether ``token`` was made with the primary key (nothing to rotate)."""
    try:
        Fernet(configured_keys()[0]).decrypt(token.encode())
    except InvalidToken:
        return False
    return True


def encrypted_fields() -> list[tuple[type[models.Model], str]]:
    """Every (model, field name) that stores an :class:`EncryptedTextField`."""
    return [
        (model, field.name)
        for model in apps.get_models()
        for field in model._meta.concrete_fields
        if isinstance(field, EncryptedTextField)
    ]


def secrets_rotate(*, batch_size: int = 500) -> dict[str, int]:
    """Re-encrypt every stored secret of every agency with the primary key; idempotent.

    Runs in a platform context (all agencies) and one transaction, locking each row it rewrites,
    so a concurrent writer cannot store a token under the old key in between. Values that no
    configured key can decrypt raise :class:`DecryptionError` and roll the whole rotation back.
    Returns the number of re-encrypted values per ``app_label.Model.field``.
    """
    rotated: dict[str, int] = {}
    with tenancy.platform_context():
        for model, field_name in encrypted_fields():
            label = f"{model._meta.label}.{field_name}"
            rotated[label] = 0
            rows = (
                model._default_manager.select_for_update()
                .exclude(**{field_name: ""})
                .only("pk", field_name)
                .order_by("pk")
            )
            for row in rows.iterator(chunk_size=batch_size):
                token = getattr(row, field_name)
                if is_primary(token):
                    continue
                setattr(row, field_name, rotate(token))
                row.save(update_fields=[field_name])
                rotated[label] += 1
    return rotated
