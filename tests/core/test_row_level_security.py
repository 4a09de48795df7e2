"""Row-level security, checked with raw SQL on the runtime role's connection."""

from __future__ import annotations

import uuid

import pytest
from django.apps import apps
from django.conf import settings
from django.db import connection, transaction
from django.db.utils import ProgrammingError

from core import tenancy
from core.models import AgencyOwnedModel
from tests.factories import AgencyFactory, SiteFactory

pytestmark = pytest.mark.django_db


def _site_names() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM core_site")
        return {row[0] for row in cursor.fetchall()}


@pytest.fixture
def two_agencies() -> tuple:
    a, b = AgencyFactory.create(), AgencyFactory.create()
    SiteFactory.create(agency=a, name="a-site")
    SiteFactory.create(agency=b, name="b-site")
    return a, b


def test_connection_is_the_runtime_role_without_privileges() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT rolsuper, rolbypassrls, rolname FROM pg_roles WHERE rolname = current_user"
        )
        is_super, bypasses_rls, name = cursor.fetchone()
        cursor.execute("SELECT count(*) FROM pg_tables WHERE tableowner = current_user")
        (owned_tables,) = cursor.fetchone()
    assert name == "agentdesk_app"
    assert is_super is False
    assert bypasses_rls is False
    assert owned_tables == 0


def test_agency_context_sees_only_its_own_rows(two_agencies: tuple) -> None:
    a, b = two_agencies
    with tenancy.agency_context(a.id):
        assert _site_names() == {"a-site"}
    with tenancy.agency_context(b.id):
        assert _site_names() == {"b-site"}


def test_no_tenant_set_sees_nothing(two_agencies: tuple) -> None:
    assert _site_names() == set()
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM core_agency")
        assert cursor.fetchone() == (0,)


def test_cannot_update_or_delete_another_agencys_rows(two_agencies: tuple) -> None:
    a, b = two_agencies
    with tenancy.agency_context(a.id), connection.cursor() as cursor:
        cursor.execute("UPDATE core_site SET name = 'hijacked' WHERE name = 'b-site'")
        assert cursor.rowcount == 0
        cursor.execute("DELETE FROM core_site WHERE name = 'b-site'")
        assert cursor.rowcount == 0
        # Moving one's own row into the other agency is refused by WITH CHECK.
        with pytest.raises(ProgrammingError, match="row-level security"), transaction.atomic():
            cursor.execute("UPDATE core_site SET agency_id = %s WHERE name = 'a-site'", [str(b.id)])
    with tenancy.agency_context(b.id):
        assert _site_names() == {"b-site"}


def test_cannot_insert_into_another_agency(two_agencies: tuple) -> None:
    a, b = two_agencies
    with tenancy.agency_context(a.id), connection.cursor() as cursor:
        with pytest.raises(ProgrammingError, match="row-level security"), transaction.atomic():
            cursor.execute(
                "INSERT INTO core_site (id, agency_id, name, domain, is_active, created_at,"
                " updated_at) VALUES (%s, %s, 'smuggled', '', true, now(), now())",
                [str(uuid.uuid4()), str(b.id)],
            )
        # The same insert for one's own agency works.
        cursor.execute(
            "INSERT INTO core_site (id, agency_id, name, domain, is_active, created_at,"
            " updated_at) VALUES (%s, %s, 'own', '', true, now(), now())",
            [str(uuid.uuid4()), str(a.id)],
        )
    with tenancy.agency_context(b.id):
        assert "smuggled" not in _site_names()


def test_nested_context_restores_the_outer_tenant(two_agencies: tuple) -> None:
    a, b = two_agencies
    with tenancy.agency_context(a.id):
        with tenancy.agency_context(b.id):
            assert _site_names() == {"b-site"}
        assert _site_names() == {"a-site"}
    assert _site_names() == set()


def test_every_agency_owned_table_has_forced_rls_and_a_policy() -> None:
    """Catalog check: any table with an agency column, or an AgencyOwnedModel, must be covered."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity,
                   (SELECT count(*) FROM pg_policies p
                     WHERE p.schemaname = 'public' AND p.tablename = c.relname)
              FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')
            """
        )
        catalog = {name: (enabled, forced, policies) for name, enabled, forced, policies in cursor}
        cursor.execute(
            "SELECT DISTINCT table_name FROM information_schema.columns"
            " WHERE table_schema = 'public' AND column_name = 'agency_id'"
        )
        with_agency_column = {row[0] for row in cursor.fetchall()}
    model_tables = {
        model._meta.db_table for model in apps.get_models() if issubclass(model, AgencyOwnedModel)
    }
    must_be_covered = with_agency_column | model_tables | {"core_agency"}
    assert {"core_site", "core_membership"} <= must_be_covered
    uncovered = {
        table: catalog.get(table)
        for table in must_be_covered
        if catalog.get(table, (False, False, 0)) == (False, False, 0)
        or not all(catalog[table][:2])
        or catalog[table][2] == 0
    }
    assert uncovered == {}


@pytest.mark.skipif(
    settings.SERVICES.database_pooler == "pgbouncer",
    reason="behind PgBouncer no statement is prepared by name (tests/core/test_pgbouncer.py)",
)
def test_the_runtime_connection_prepares_repeated_statements() -> None:
    """DATABASE_PREPARE_THRESHOLD (5): a statement run that often is prepared on the server."""
    statement = "SELECT count(*) FROM core_agency WHERE id = %s"
    with connection.cursor() as cursor:
        for _ in range(6):
            cursor.execute(statement, [uuid.uuid4()])
        cursor.execute("SELECT count(*) FROM pg_prepared_statements")
        (prepared,) = cursor.fetchone()
    assert connection.connection.prepare_threshold == 5
    assert prepared >= 1
