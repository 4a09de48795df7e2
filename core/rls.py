"""Row-level security DDL for migrations: the only place policies are written.

Policies compare a table's agency column with the transaction-local settings that
:mod:`core.tenancy` sets. ``NULLIF(..., '')`` matters: once a transaction-local setting has been
used in a session, reading it outside that transaction yields ``''``, which must mean "no tenant"
rather than a cast error.
"""

from __future__ import annotations

from django.db import migrations

# Kept in SQL functions so that every policy reads the settings the same way.
FUNCTIONS_SQL = """
CREATE OR REPLACE FUNCTION app_current_agency() RETURNS uuid
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ SELECT NULLIF(current_setting('app.agency_id', true), '')::uuid $$;
CREATE OR REPLACE FUNCTION app_all_agencies() RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ SELECT coalesce(current_setting('app.all_agencies', true), '') = 'on' $$;
CREATE OR REPLACE FUNCTION app_current_user() RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ SELECT NULLIF(current_setting('app.user_id', true), '')::bigint $$;
"""

FUNCTIONS_REVERSE_SQL = """
DROP FUNCTION IF EXISTS app_current_agency();
DROP FUNCTION IF EXISTS app_all_agencies();
DROP FUNCTION IF EXISTS app_current_user();
"""

POLICY_NAME = "agency_isolation"


def tenant_predicate(column: str = "agency_id") -> str:
    return f"({column} = app_current_agency() OR app_all_agencies())"


def enable_rls(table: str, *, column: str = "agency_id") -> migrations.RunSQL:
    """ENABLE + FORCE row-level security on ``table`` with the agency policy (reversible)."""
    predicate = tenant_predicate(column)
    return migrations.RunSQL(
        sql=f"""
            ALTER TABLE {table} ENABLE ROW LEVEL SECURITY;
            ALTER TABLE {table} FORCE ROW LEVEL SECURITY;
            CREATE POLICY {POLICY_NAME} ON {table}
                USING {predicate} WITH CHECK {predicate};
        """,
        reverse_sql=f"""
            DROP POLICY IF EXISTS {POLICY_NAME} ON {table};
            ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY;
            ALTER TABLE {table} DISABLE ROW LEVEL SECURITY;
        """,
    )


def allow_read_own_rows(table: str, *, name: str, column: str = "user_id") -> migrations.RunSQL:
    """An extra SELECT-only policy: a user may read their own rows before an agency is set.

    The tenant middleware needs this to find a user's membership, from which it sets the agency.
    """
    return migrations.RunSQL(
        sql=f"CREATE POLICY {name} ON {table} FOR SELECT USING ({column} = app_current_user());",
        reverse_sql=f"DROP POLICY IF EXISTS {name} ON {table};",
    )


def shared_rows_predicate(column: str = "agency_id") -> str:
    # A tenant (or the platform) must be set: with no tenant a query still sees nothing at all.
    return f"({column} IS NULL AND (app_current_agency() IS NOT NULL OR app_all_agencies()))"


def allow_read_shared_rows(
    table: str, *, name: str = "shared_rows_read", column: str = "agency_id"
) -> migrations.RunSQL:
    """An extra SELECT-only policy: platform rows (``agency_id IS NULL``) are readable by everyone.

    For catalogues every agency uses (system tools, agent templates, model prices, default risk
    rules). Writes still go through the tenant policy of :func:`enable_rls`, whose ``WITH CHECK``
    is false for a NULL agency unless :func:`core.tenancy.platform_context` is on: an agency can
    read the shared rows but neither insert, update nor delete them.
    """
    return migrations.RunSQL(
        sql=(f"CREATE POLICY {name} ON {table} FOR SELECT USING {shared_rows_predicate(column)};"),
        reverse_sql=f"DROP POLICY IF EXISTS {name} ON {table};",
    )
