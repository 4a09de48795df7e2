"""Production loads no devkit module: its settings, the ASGI application, the Celery app with its
tasks, the URLconf and every admin module, loaded in a fresh process as the Dockerfile and
docker-compose.yml run them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

# What a web, worker or beat process of production imports, then the devkit modules among all.
LOAD_EVERYTHING = """
import importlib, json, sys
import django
django.setup()
import config.asgi
import config.celery_app
from django.apps import apps
from django.urls import get_resolver
get_resolver().url_patterns  # the URLconf and every module it includes
# Every app's tasks (as the worker's autodiscovery imports them) and admin modules.
for config in apps.get_app_configs():
    for module in ("tasks", "admin"):
        try:
            importlib.import_module(f"{config.name}.{module}")
        except ModuleNotFoundError as missing:
            if missing.name != f"{config.name}.{module}":
                raise
print(json.dumps(sorted(m for m in sys.modules if m == "devkit" or m.startswith("devkit."))))
"""


def _devkit_modules_loaded(settings_module: str, tmp_path: Path) -> list[str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DJANGO_", "DATABASE_", "AGENTDESK_TEST_", "PROMETHEUS_"))
    }
    env.update(
        DJANGO_SETTINGS_MODULE=settings_module,
        DJANGO_SECRET_KEY="test-only",
        DJANGO_ALLOWED_HOSTS="agentdesk.example.com",
        AGENTDESK_ENCRYPTION_KEYS=Fernet.generate_key().decode(),
        # Nothing listens there: loading connects to no server.
        DATABASE_URL="postgres://agentdesk_app:x@127.0.0.1:1/agentdesk",
        DATABASE_OWNER_URL="postgres://agentdesk_owner:x@127.0.0.1:1/agentdesk",
        REDIS_URL="redis://127.0.0.1:1/0",
        PROMETHEUS_MULTIPROC_DIR=str(tmp_path),
    )
    done = subprocess.run(
        [sys.executable, "-c", LOAD_EVERYTHING],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    loaded: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded


def test_production_loads_no_devkit_module(tmp_path: Path) -> None:
    assert _devkit_modules_loaded("config.settings.production", tmp_path) == []


def test_development_settings_load_devkit(tmp_path: Path) -> None:
    """The same probe sees devkit where it is installed: the check above can fail."""
    loaded = _devkit_modules_loaded("config.settings.dev", tmp_path)
    assert "devkit.services" in loaded
    assert "devkit.management" not in loaded  # commands load only when one is run


def test_production_without_service_urls_refuses_to_start(tmp_path: Path) -> None:
    """No embedded servers in production: loading its settings without the URLs is an error that
    names them, and starts nothing in the data folder."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DJANGO_", "DATABASE_", "REDIS_", "AGENTDESK_TEST_"))
    }
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings.production",
        DJANGO_SECRET_KEY="test-only",
        DJANGO_ALLOWED_HOSTS="agentdesk.example.com",
        AGENTDESK_ENCRYPTION_KEYS=Fernet.generate_key().decode(),
        AGENTDESK_DATA_DIR=str(tmp_path / "data"),
    )
    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode != 0
    assert "Set DATABASE_URL and REDIS_URL" in done.stderr
    assert not (tmp_path / "data").exists()
