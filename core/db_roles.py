"""Database roles: an owner that runs migrations and a runtime role for web, worker and beat.

The runtime role is LOGIN, NOSUPERUSER, NOBYPASSRLS and owns nothing, so row-level security always
applies to it. Plain psycopg (no Django) because the embedded bootstrap runs before settings load.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

SSL_OPTIONS = ("sslmode", "sslrootcert", "sslcert", "sslkey")


def conninfo_from_settings(settings_dict: dict[str, Any]) -> str:
    """A libpq connection string from a Django ``DATABASES`` entry."""
    params: dict[str, Any] = {
        "dbname": settings_dict.get("NAME"),
        "user": settings_dict.get("USER"),
        "password": settings_dict.get("PASSWORD"),
        "host": settings_dict.get("HOST"),
        "port": settings_dict.get("PORT"),
    }
    options = settings_dict.get("OPTIONS") or {}
    params.update({key: options[key] for key in SSL_OPTIONS if key in options})
    return make_conninfo("", **{key: str(value) for key, value in params.items() if value})


def with_database(conninfo: str, database: str) -> str:
    params = conninfo_to_dict(conninfo)
    params["dbname"] = database
    return make_conninfo("", **params)


def bootstrap(
    admin_conninfo: str,
    *,
    database: str,
    owner: str,
    runtime: str,
    owner_password: str | None = None,
    runtime_password: str | None = None,
) -> None:
    """Create or refresh both roles, the database (owned by ``owner``) and pgvector. Idempotent.

    Needs a superuser connection: creating roles and the ``vector`` extension requires one.
    """
    with psycopg.connect(admin_conninfo, autocommit=True) as conn:
        for role, password, extra in (
            (owner, owner_password, sql.SQL("CREATEDB")),
            (runtime, runtime_password, sql.SQL("")),
        ):
            exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role]).fetchone()
            verb = sql.SQL("ALTER") if exists else sql.SQL("CREATE")
            conn.execute(
                sql.SQL("{} ROLE {} LOGIN NOSUPERUSER NOBYPASSRLS {}").format(
                    verb, sql.Identifier(role), extra
                )
            )
            if password:
                conn.execute(
                    sql.SQL("ALTER ROLE {} PASSWORD {}").format(
                        sql.Identifier(role), sql.Literal(password)
                    )
                )
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [database]).fetchone()
        if not exists:
            conn.execute(
                sql.SQL("CREATE DATABASE {} OWNER {}").format(
                    sql.Identifier(database), sql.Identifier(owner)
                )
            )
        else:
            conn.execute(
                sql.SQL("ALTER DATABASE {} OWNER TO {}").format(
                    sql.Identifier(database), sql.Identifier(owner)
                )
            )
    # template1 too, so that databases created later (the test database) have pgvector.
    for name in ("template1", database):
        with psycopg.connect(with_database(admin_conninfo, name), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            if name == database:
                conn.execute(
                    sql.SQL("ALTER SCHEMA public OWNER TO {}").format(sql.Identifier(owner))
                )


def grant_runtime(owner_conninfo: str, *, runtime: str) -> None:
    """Give the runtime role data access (never DDL, never ownership) to every table; idempotent.

    Run as the owner after migrations; default privileges cover tables created later.
    """
    role = sql.Identifier(runtime)
    statements = [
        sql.SQL("GRANT USAGE ON SCHEMA public TO {}"),
        sql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {}"),
        sql.SQL("GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {}"),
        sql.SQL("GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO {}"),
        sql.SQL(
            "ALTER DEFAULT PRIVILEGES IN SCHEMA public"
            " GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {}"
        ),
        sql.SQL("ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT ON SEQUENCES TO {}"),
    ]
    with psycopg.connect(owner_conninfo, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement.format(role))
