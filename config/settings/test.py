"""Test settings: the same services as development, a separate database, fast password hashing."""

from config.settings.base import *  # noqa: F403
from config.settings.base import DATABASES

# pytest's session fixture (tests/conftest.py) creates this database as the owner and migrates it.
for _alias in ("default", "owner"):
    DATABASES[_alias]["NAME"] = "agentdesk_test"
    DATABASES[_alias]["CONN_MAX_AGE"] = 0

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

WHITENOISE_AUTOREFRESH = True
