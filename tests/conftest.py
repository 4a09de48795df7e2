"""Test session set-up: the embedded (or configured) PostgreSQL and Redis, a fresh test database
created by the owner role and migrated as the owner, and tests running as the runtime role."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
import psycopg
import pytest
from django.conf import settings
from django.core.management import call_command
from psycopg import sql

from config.env import service_urls
from core import db_roles

# Real worker, fake provider server and agents wired to it, for every end-to-end test.
pytest_plugins = ["tests.processes"]


def _maintenance_conninfo() -> str:
    """The superuser when one is configured (it may end other roles' sessions), else the owner."""
    admin = service_urls().database_admin
    if admin:
        return db_roles.with_database(admin, "postgres")
    owner = settings.DATABASES["owner"]
    return db_roles.with_database(db_roles.conninfo_from_settings(owner), "postgres")


def _drop_stale_test_databases(conn: psycopg.Connection[Any]) -> None:
    """Drop test databases of earlier runs whose process is gone (a crashed or killed run)."""
    prefix = settings.TEST_DATABASE_PREFIX
    rows = conn.execute(
        "SELECT datname FROM pg_database WHERE datname LIKE %s", [prefix + "%"]
    ).fetchall()
    for (name,) in rows:
        pid = name.removeprefix(prefix)
        if pid.isdigit() and not psutil.pid_exists(int(pid)):
            # Still in use by someone we may not disconnect: leave it for next time.
            with contextlib.suppress(psycopg.Error):
                conn.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
                )


TEMPLATE_PREFIX = "agentdesk_tpl_"
ROOT = Path(__file__).resolve().parents[1]


def _template_name() -> str:
    """The migrated template's name: a digest of what makes the schema (every migration, the
    migrate command and its grants, the roles), so that a change to any of them builds anew."""
    digest = hashlib.sha256()
    files = sorted(ROOT.glob("*/migrations/*.py")) + sorted(ROOT.glob("*/*/migrations/*.py"))
    files += [
        ROOT / "core" / "management" / "commands" / "migrate.py",
        ROOT / "core" / "db_roles.py",
    ]
    for path in files:
        digest.update(path.relative_to(ROOT).as_posix().encode())
        digest.update(path.read_bytes())
    for alias in ("owner", "default"):
        digest.update(settings.DATABASES[alias]["USER"].encode())
    return TEMPLATE_PREFIX + digest.hexdigest()[:16]


def _is_template(conn: psycopg.Connection[Any], name: str) -> bool | None:
    """``None``: no such database; ``False``: one left half-built by a run that died."""
    row = conn.execute(
        "SELECT datistemplate FROM pg_database WHERE datname = %s", [name]
    ).fetchone()
    return None if row is None else bool(row[0])


def _drop(conn: psycopg.Connection[Any], name: str) -> None:
    if _is_template(conn, name):
        conn.execute(sql.SQL("ALTER DATABASE {} IS_TEMPLATE false").format(sql.Identifier(name)))
    conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def _build_template(conn: psycopg.Connection[Any], name: str, owner: str) -> None:
    """Migrate a new database ``name`` in a process of its own (which leaves no connection to
    it, as cloning needs) and mark it a template; templates of other schemas are dropped."""
    stale = conn.execute(
        "SELECT datname FROM pg_database WHERE datname LIKE %s", [TEMPLATE_PREFIX + "%"]
    ).fetchall()
    for (other,) in stale:
        with contextlib.suppress(psycopg.Error):  # in use by another run's clone: next time
            _drop(conn, other)
    conn.execute(
        sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(name), sql.Identifier(owner))
    )
    environment = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "AGENTDESK_TEST_DB": name,
        "AGENTDESK_TEST_DB_WORKER": os.environ.get("PYTEST_XDIST_WORKER", ""),
        "PROMETHEUS_MULTIPROC_DIR": settings.PROMETHEUS_MULTIPROC_DIR,
    }
    migrate = [sys.executable, "manage.py", "migrate", "--no-input", "--verbosity", "0"]
    subprocess.run(migrate, cwd=ROOT, env=environment, check=True)  # as the owner, then grants
    conn.execute(sql.SQL("ALTER DATABASE {} IS_TEMPLATE true").format(sql.Identifier(name)))


def _create_test_database() -> None:
    """This run's database, a copy of the migrated template (built by the first run or
    pytest-xdist worker that finds none for the current migrations; the others wait for it):
    migrating takes some 20 s of CPU, a copy well under one."""
    owner = settings.DATABASES["owner"]
    name = owner["NAME"]
    urls = service_urls()
    with psycopg.connect(_maintenance_conninfo(), autocommit=True) as lock:
        # One test process at a time (pytest-xdist workers start together): two refreshing the
        # roles at once fail ("tuple concurrently updated"), and CREATE DATABASE fails while
        # another's bootstrap is connected to template1. Released when the connection closes.
        lock.execute("SELECT pg_advisory_lock(hashtext('agentdesk test database setup'))")
        if urls.database_admin:
            db_roles.bootstrap(
                urls.database_admin,
                database=name,
                owner=owner["USER"],
                runtime=settings.DATABASES["default"]["USER"],
            )
        _drop_stale_test_databases(lock)
        # Dropped and created on the superuser's connection when there is one: the bootstrap's
        # own session in this database may still be exiting, and only a superuser may end a
        # superuser's session (DROP ... WITH (FORCE) as the owner failed on a busy CI machine).
        lock.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        template = _template_name()
        if not _is_template(lock, template):
            _drop(lock, template)
            _build_template(lock, template, owner["USER"])
        lock.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {} OWNER {}").format(
                sql.Identifier(name), sql.Identifier(template), sql.Identifier(owner["USER"])
            )
        )


def _rolled_back(item: pytest.Item) -> bool:
    """Whether the test's database work is rolled back (pytest-django's ``db``)."""
    return item.get_closest_marker("django_db") is not None or "db" in getattr(
        item, "fixturenames", ()
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests whose database work is rolled back before those that commit, and in each group
    the tests marked slow first (in their order), the rest after: on pytest-xdist workers the
    long ones start at once and the short ones fill the gaps, instead of one long test starting
    last and running alone at the end (the longest-first rule of scheduling).

    Tests marked serial stop or kill the PostgreSQL or Redis that every test uses: on one of
    several pytest-xdist workers they are skipped, not run beside the other workers' tests
    (`make test` runs them in a process of their own, on servers of their own: tests/run.py)."""
    if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) < 2:
        return
    # Within pytest-django's order, kept: the tests whose database work is rolled back first,
    # then those that commit (live_db: a worker or a server must see their rows). A test that
    # reads every agency's rows ("nothing written anywhere", a superuser's list) must not run on
    # a worker after another test committed rows there.
    items.sort(key=lambda item: (not _rolled_back(item), item.get_closest_marker("slow") is None))
    skip = pytest.mark.skip(reason="serial: run it on its own (pytest -m serial)")
    for item in items:
        if item.get_closest_marker("serial"):
            item.add_marker(skip)


def pytest_configure(config: pytest.Config) -> None:
    """The apps' admin modules, as a web process has them from its start (config/asgi.py),
    before collection (tests are parametrized over the admin's registry) and whatever URL a
    test resolves first. Processes the tests start load them as they would in production."""
    import django
    from django.contrib import admin

    django.setup()  # done already by pytest-django: a no-op then
    admin.autodiscover()


@pytest.fixture(scope="session")
def django_db_setup(django_db_blocker: Any) -> None:
    with django_db_blocker.unblock():
        _create_test_database()  # migrated: a copy of the template
        # The system checks, as Django's test runner runs them once the databases exist: they
        # also learn each connection's server version (a generated field's check asks), which
        # a test would otherwise be refused (celery runs the checks again when it first
        # imports the task modules, from inside a test).
        call_command("check", verbosity=0)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Drop this run's database. The embedded servers stay up (`make test` stops them on CI)."""
    from django.db import connections

    connections.close_all()
    with psycopg.connect(_maintenance_conninfo(), autocommit=True) as conn:
        name = settings.DATABASES["owner"]["NAME"]
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
    if "prometheus-test" in settings.PROMETHEUS_MULTIPROC_DIR:  # this run's own (test settings)
        shutil.rmtree(settings.PROMETHEUS_MULTIPROC_DIR, ignore_errors=True)


@pytest.fixture
def live_db(django_db_setup: None, django_db_blocker: Any) -> Any:
    """Database access with real commits, for work that other processes (a Celery worker) must
    see. No rollback afterwards: each test isolates itself by creating its own agencies."""
    with django_db_blocker.unblock():
        yield
        from django.db import connections

        connections.close_all()
