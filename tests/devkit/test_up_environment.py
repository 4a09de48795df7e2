"""What `manage.py up` hands its children (web, worker, beat) besides the services: the address
it serves on, for the links in e-mails, unless the environment names one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from devkit.management.commands.up import Command, web_url

ROOT = Path(__file__).resolve().parents[2]
SERVICES = SimpleNamespace(
    database="postgres://app@127.0.0.1:1/x", database_owner="postgres://o@127.0.0.1:1/x",
    redis="redis://127.0.0.1:1/0",
)  # fmt: skip


def _child_env(host: str, port: int) -> dict[str, str]:
    return Command()._child_env(SERVICES, None, base_url=web_url({"host": host, "port": port}))


def _base_url_seen_by(env: dict[str, str]) -> str:
    """AGENTDESK_BASE_URL as a child's settings read it (a real child process)."""
    code = "import django; django.setup(); from django.conf import settings; "
    code += "print(settings.AGENTDESK_BASE_URL)"
    env = {**env, "DJANGO_SETTINGS_MODULE": "config.settings.dev"}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip().splitlines()[-1]


def test_children_link_to_the_port_up_serves_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTDESK_BASE_URL", raising=False)

    env = _child_env("127.0.0.1", 8123)

    assert env["AGENTDESK_BASE_URL"] == "http://127.0.0.1:8123"
    assert _base_url_seen_by(env) == "http://127.0.0.1:8123"


@pytest.mark.parametrize(
    ("host", "url"),
    [("0.0.0.0", "http://localhost:8123"), ("::1", "http://[::1]:8123")],
)
def test_a_wildcard_or_ipv6_address_becomes_a_link_a_browser_opens(host: str, url: str) -> None:
    assert web_url({"host": host, "port": 8123}) == url


def test_an_address_the_environment_names_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTDESK_BASE_URL", "https://agents.example.com")

    assert _child_env("127.0.0.1", 8123)["AGENTDESK_BASE_URL"] == "https://agents.example.com"
