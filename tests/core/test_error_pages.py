"""Error pages: a missing page and a failing page answer AgentDesk's own pages (the admin's look,
nothing of the internals) under the settings `manage.py up` runs its web server with, unless
DJANGO_DEBUG is set explicitly; and `up` never passes DEBUG to a web server other machines reach.

Reproduced on `make run` before: an unauthenticated GET of a missing page listed every URL pattern
(Django's technical 404) and a failing admin page showed the technical 500, with the database's
role names, its socket path and the Redis URL."""

from __future__ import annotations

import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import quote

import pytest
from django.conf import settings
from django.test import Client, override_settings

from devkit.management.commands.up import Command, web_url
from tests.core.failing_site import FAILING_PATH
from tests.processes import AsgiServer

ROOT = Path(__file__).resolve().parents[2]


def _database_url(alias: str) -> str:
    db = settings.DATABASES[alias]
    password = f":{quote(db['PASSWORD'], safe='')}" if db.get("PASSWORD") else ""
    host = quote(db["HOST"], safe="")
    return f"postgresql://{quote(db['USER'], safe='')}{password}@{host}:{db['PORT']}/{db['NAME']}"


@pytest.fixture(scope="module")
def up_web(django_db_setup: None) -> Iterator[AsgiServer]:
    """The web server as `manage.py up` runs it (uvicorn, config.settings.dev, no DJANGO_DEBUG
    in the environment), on this test run's database and Redis."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("DJANGO_DEBUG", raising=False)
        server = AsgiServer(
            DJANGO_SETTINGS_MODULE="tests.core.up_settings_failing_site",
            DATABASE_URL=_database_url("default"),
            DATABASE_OWNER_URL=_database_url("owner"),
            REDIS_URL=settings.REDIS_URL,
            AGENTDESK_CACHE_KEY_PREFIX=str(settings.CACHES["default"]["KEY_PREFIX"]),
            PROMETHEUS_MULTIPROC_DIR=settings.PROMETHEUS_MULTIPROC_DIR,
        ).start()
    yield server
    server.stop()


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def _assert_styled(page: str, status: int) -> None:
    assert 'id="error-page"' in page, page[:2000]
    assert f'data-status="{status}"' in page
    assert "unfold/css/styles.css" in page  # the admin's look
    assert "--color-primary-600" in page  # its colours, which its stylesheet leaves to the page
    assert "Go to the AgentDesk home" in page


def _assert_nothing_internal(page: str) -> None:
    for leak in (
        "Traceback",
        "URLconf",
        "DATABASES",
        "REDIS_URL",
        "Django tried these URL patterns",
        settings.REDIS_URL,
        settings.DATABASES["default"]["USER"],
        settings.DATABASES["owner"]["USER"],
        str(settings.DATABASES["default"]["HOST"]),
    ):
        assert leak not in page, leak


def test_a_missing_page_is_agentdesks_404_under_ups_settings(up_web: AsgiServer) -> None:
    status, page = _get(f"{up_web.url}/nonexistent-page")

    assert status == 404
    _assert_styled(page, 404)
    assert "/nonexistent-page" in page
    _assert_nothing_internal(page)


def test_a_failing_page_is_agentdesks_500_under_ups_settings(up_web: AsgiServer) -> None:
    status, page = _get(f"{up_web.url}{FAILING_PATH}")

    assert status == 500
    _assert_styled(page, 500)
    assert "The error has been logged" in page
    _assert_nothing_internal(page)
    assert "a page that fails, on purpose" in up_web.output()  # logged, for the operators


@pytest.mark.django_db
def test_the_pages_render_in_process_too() -> None:
    """The same handlers under the test settings (no database needed for either page)."""
    missing = Client().get("/no/such/page/")
    assert missing.status_code == 404
    _assert_styled(missing.content.decode(), 404)

    with override_settings(ROOT_URLCONF="tests.core.failing_site"):
        response = Client(raise_request_exception=False).get(FAILING_PATH)
    assert response.status_code == 500
    _assert_styled(response.content.decode(), 500)


# --- what `up` hands its web server ---------------------------------------------------------------
SERVICES = SimpleNamespace(
    database="postgres://app@127.0.0.1:1/x", database_owner="postgres://o@127.0.0.1:1/x",
    redis="redis://127.0.0.1:1/0",
)  # fmt: skip


def _debug_seen_by_web(host: str, monkeypatch: pytest.MonkeyPatch, debug: str | None) -> bool:
    """settings.DEBUG as `up`'s web child reads it (a real child process, up's settings)."""
    if debug is None:
        monkeypatch.delenv("DJANGO_DEBUG", raising=False)
    else:
        monkeypatch.setenv("DJANGO_DEBUG", debug)
    env = Command()._child_env(
        SERVICES, None, base_url=web_url({"host": host, "port": 8000}), host=host
    )
    env["DJANGO_SETTINGS_MODULE"] = "config.settings.dev"
    code = "import django; django.setup(); from django.conf import settings; print(settings.DEBUG)"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip().splitlines()[-1] == "True"


def test_debug_is_off_unless_set(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not _debug_seen_by_web("127.0.0.1", monkeypatch, None)


def test_an_explicit_debug_reaches_a_web_server_on_loopback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert _debug_seen_by_web("127.0.0.1", monkeypatch, "true")
    assert _debug_seen_by_web("localhost", monkeypatch, "true")


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "agentdesk.lan"])
def test_debug_never_reaches_a_web_server_others_reach(
    host: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert not _debug_seen_by_web(host, monkeypatch, "true")
