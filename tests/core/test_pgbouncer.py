"""Through PgBouncer in transaction pooling mode (README "PgBouncer"): nothing of one client's
transaction reaches another client of the same server session.

A private pgbouncer with ONE server connection stands in front of the test database, so two
clients always share one PostgreSQL session and anything that outlives a transaction shows. Each
unsafe setting is shown to leak or fail there first (what session pooling hides and transaction
pooling exposes); the platform's own code and settings (DATABASE_POOLER=pgbouncer) then do not.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from django.conf import settings
from django.contrib.auth.models import Permission
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, connections
from django.db.backends.base.base import BaseDatabaseWrapper

from config.settings import base as base_settings
from core import tenancy
from core.models import Site
from devkit import embedded
from devkit.embedded import pgbouncer_server
from tests.factories import AgencyFactory, SiteFactory

pytestmark = [
    pytest.mark.skipif(
        pgbouncer_server.binary() is None,
        reason="pgbouncer is not installed (Debian: apt-get install pgbouncer; `make test` does)",
    ),
    pytest.mark.skipif(
        not settings.SERVICES.embedded, reason="the private pgbouncer fronts the embedded server"
    ),
]
ALIAS = "through_pgbouncer"


@pytest.fixture(scope="module")
def one_server_connection() -> Iterator[int]:
    """The port of a private pgbouncer in transaction mode with a pool of one server connection."""
    folder = embedded.data_dir() / "pgbouncer-tests" / f"{os.getpid()}-{uuid.uuid4().hex[:6]}"
    endpoint = embedded.locate()
    port = embedded.free_port()
    pgbouncer_server.start(
        folder,
        port=port,
        pg_socket_dir=endpoint.postgres_socket_dir,
        pg_port=endpoint.postgres_port,
        pool_size=1,
    )
    try:
        yield port
    finally:
        pgbouncer_server.stop(folder)
        for path in sorted(folder.rglob("*"), reverse=True):
            path.unlink(missing_ok=True)
        folder.rmdir()


def _client(port: int, **options: Any) -> psycopg.Connection[Any]:
    """A plain client of the private pgbouncer; it names no prepared statement unless told."""
    options.setdefault("prepare_threshold", None)
    return psycopg.connect(
        host="127.0.0.1",
        port=port,
        user=embedded.RUNTIME_ROLE,
        dbname=settings.DATABASES["default"]["NAME"],
        autocommit=True,
        **options,
    )


def _session_of(client: psycopg.Connection[Any]) -> tuple[int, str, int]:
    """The server session's pid, its tenant setting and the sites it sees (no tenant set)."""
    row = client.execute(
        "SELECT pg_backend_pid(), coalesce(current_setting('app.agency_id', true), ''),"
        " (SELECT count(*) FROM core_site)"
    ).fetchone()
    assert row is not None
    return row


def _count(client: psycopg.Connection[Any], statement: str) -> int:
    row = client.execute(statement).fetchone()
    assert row is not None
    return int(row[0])


@contextmanager
def _django_connection(
    port: int, monkeypatch: pytest.MonkeyPatch, **environment: str
) -> Iterator[BaseDatabaseWrapper]:
    """A Django connection (alias ``ALIAS``) through the private pgbouncer, configured by the
    settings' own ``_database`` with ``environment`` (e.g. DATABASE_POOLER=pgbouncer)."""
    with monkeypatch.context() as patch:
        patch.setenv("DATABASE_POOL", "false")
        for key, value in environment.items():
            patch.setenv(key, value)
        name = settings.DATABASES["default"]["NAME"]
        config = base_settings._database(
            f"postgresql://{embedded.RUNTIME_ROLE}@127.0.0.1:{port}/{name}"
        )
    config["CONN_MAX_AGE"] = 0
    configured = connections.configure_settings(
        {"default": {**connection.settings_dict}, ALIAS: config}
    )
    connections.settings[ALIAS] = configured[ALIAS]
    try:
        yield connections[ALIAS]
    finally:
        connections[ALIAS].close()
        del connections[ALIAS]
        del connections.settings[ALIAS]


@pytest.fixture
def two_agencies(live_db: None) -> tuple[Any, Any]:
    a, b = AgencyFactory.create(), AgencyFactory.create()
    SiteFactory.create(agency=a, name="a-site")
    SiteFactory.create(agency=b, name="b-site")
    return a, b


def test_a_session_setting_leaks_to_the_next_client_of_the_same_server_connection(
    live_db: None, one_server_connection: int
) -> None:
    """Why tenant settings must be transaction-local: set for the session, they stay with the
    server connection and the next client (another request, another agency) inherits them."""
    a = AgencyFactory.create()
    SiteFactory.create(agency=a, name="a-site")
    with _client(one_server_connection) as first, _client(one_server_connection) as second:
        first.execute("SELECT set_config('app.agency_id', %s, false)", [str(a.id)])
        try:
            assert _session_of(second)[1:] == (str(a.id), 1)
        finally:
            first.execute("SELECT set_config('app.agency_id', '', false)")


def test_the_tenant_of_a_transaction_never_reaches_the_next_client(
    two_agencies: tuple[Any, Any], one_server_connection: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every way the platform sets a tenant (a tenant block, a deferred one, the runtime's
    one-round-trip write), then another client of the same server session: no tenant, no rows."""
    a, _ = two_agencies
    with (
        _django_connection(one_server_connection, monkeypatch, DATABASE_POOLER="pgbouncer") as db,
        _client(one_server_connection) as other,
    ):
        for defer in (False, True):
            with tenancy.agency_context(a.id, using=ALIAS, defer=defer):
                assert list(Site.objects.using(ALIAS).values_list("name", flat=True)) == ["a-site"]
                with db.cursor() as cursor:
                    cursor.execute("SELECT pg_backend_pid()")
                    (pid,) = cursor.fetchone()
            assert _session_of(other) == (pid, "", 0)
        seen = tenancy.run_in_one_round_trip(
            a.id, "SELECT current_setting('app.agency_id'), pg_backend_pid()", [], using=ALIAS
        )
        assert seen is not None
        assert seen[0] == str(a.id)
        assert _session_of(other) == (seen[1], "", 0)


def test_named_prepared_statements_collide_through_the_pooler_and_its_settings_name_none(
    live_db: None, one_server_connection: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """psycopg names its prepared statements per client connection (_pg3_0, ...): two clients
    of one server session collide. Behind PgBouncer the settings prepare nothing by name."""
    statement = "SELECT count(*) FROM core_site WHERE name = %s"
    with (
        _client(one_server_connection, prepare_threshold=0) as first,
        _client(one_server_connection, prepare_threshold=0) as second,
    ):
        first.execute(statement, ["x"])
        with pytest.raises(psycopg.errors.DuplicatePreparedStatement):
            second.execute("SELECT %s::text", ["y"])
        # Nothing resets a server session in transaction mode: it would outlive both clients.
        first.execute("DEALLOCATE ALL")

    with _django_connection(one_server_connection, monkeypatch, DATABASE_POOLER="pgbouncer") as db:
        assert db.settings_dict["OPTIONS"]["prepare_threshold"] is None
        with _client(one_server_connection) as other:
            for _ in range(8):  # past the threshold that prepares without a pooler (5)
                with db.cursor() as cursor:
                    cursor.execute(statement, ["x"])
                other.execute(statement, ["y"])
            prepared = _count(other, "SELECT count(*) FROM pg_prepared_statements")
    assert prepared == 0


def test_no_cursor_of_an_iteration_outlives_its_transaction_behind_the_pooler(
    live_db: None, one_server_connection: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Django iterates (``.iterator()``) outside a transaction with a WITH HOLD server-side
    cursor, which stays in the server session between transactions (another client sees it, and
    a later FETCH may reach another session); behind PgBouncer the settings use none."""

    def cursors_seen_while_iterating(**environment: str) -> int:
        with (
            _django_connection(one_server_connection, monkeypatch, **environment) as db,
            _client(one_server_connection) as other,
        ):
            assert db.get_autocommit()
            rows = Permission.objects.using(ALIAS).order_by("pk").iterator(chunk_size=5)
            next(rows)
            held = _count(other, "SELECT count(*) FROM pg_cursors")
            assert len(list(rows)) > 5
            return held

    assert cursors_seen_while_iterating(DATABASE_POOLER="none") == 1
    assert cursors_seen_while_iterating(DATABASE_POOLER="pgbouncer") == 0


@pytest.mark.skipif(
    settings.SERVICES.database_pooler != "pgbouncer",
    reason="only when the suite runs through the embedded pgbouncer (AGENTDESK_EMBEDDED_PGBOUNCER)",
)
def test_the_suite_goes_through_the_embedded_pgbouncer(db: None) -> None:
    """AGENTDESK_EMBEDDED_PGBOUNCER=1: the runtime role's connections are pgbouncer's clients."""
    port = pgbouncer_server.saved_port(embedded.data_dir() / embedded.PGBOUNCER)
    assert connection.settings_dict["PORT"] == port
    assert connection.settings_dict["OPTIONS"]["prepare_threshold"] is None
    with psycopg.connect(
        host="127.0.0.1", port=port, user=embedded.SUPERUSER_ROLE, dbname="pgbouncer",
        autocommit=True, prepare_threshold=None,
    ) as console:  # fmt: skip
        cursor = console.cursor()
        cursor.execute("SHOW POOLS")
        columns = [column.name for column in cursor.description or ()]
        pools = {(row[columns.index("database")], row[columns.index("user")]) for row in cursor}
        cursor.execute("SHOW CONFIG")
        pool_mode = {row[0]: row[1] for row in cursor}["pool_mode"]
    assert (connection.settings_dict["NAME"], embedded.RUNTIME_ROLE) in pools
    assert pool_mode == "transaction"


def test_an_unknown_pooler_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_POOLER", "pgpool")
    with pytest.raises(ImproperlyConfigured, match="DATABASE_POOLER must be 'pgbouncer' or 'none'"):
        base_settings._database("postgresql://agentdesk_app@127.0.0.1:1/agentdesk")
