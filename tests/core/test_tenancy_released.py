"""tenancy.released(): a deferred block (the runtime's step transaction) that has only read ends
its transaction for work that needs no database (a DuckDB query, a sandboxed script), so its
connection is not idle in a transaction meanwhile; the next query begins a new one with the same
tenant and savepoint, and what is written after commits with the block. A block that wrote first
keeps its transaction. Outermost blocks only: committed data (``live_db``)."""

from __future__ import annotations

import uuid

import psycopg
import pytest
from django.db import connection

from core import tenancy
from core.models import Site
from tests.conftest import _maintenance_conninfo
from tests.factories import AgencyFactory, SiteFactory

SAVEPOINT = "agentdesk_tool"


def _state() -> str:
    """This connection's state as PostgreSQL shows it to another session."""
    pid = connection.connection.info.backend_pid
    with psycopg.connect(_maintenance_conninfo(), autocommit=True) as other:
        row = other.execute("SELECT state FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone()
    assert row is not None
    return str(row[0])


def _sites() -> list[str]:
    return sorted(Site.objects.values_list("name", flat=True))


def test_a_block_that_only_read_is_idle_meanwhile_and_goes_on_as_one_transaction(
    live_db: None,
) -> None:
    a, b = AgencyFactory.create(), AgencyFactory.create()
    SiteFactory.create(agency=a, name="a1")
    SiteFactory.create(agency=b, name="b1")
    with tenancy.agency_context(a.id, then=[f"SAVEPOINT {SAVEPOINT}"], defer=True):
        assert _sites() == ["a1"]
        assert _state() == "idle in transaction"
        with tenancy.released() as released:
            assert released is True
            assert _state() == "idle"  # no transaction while the work runs
        # The next query begins the transaction again: the same agency, the savepoint there.
        assert _sites() == ["a1"]
        SiteFactory.create(agency=a, name="rolled-back")
        with connection.cursor() as cursor:
            cursor.execute(f"ROLLBACK TO SAVEPOINT {SAVEPOINT}")
        SiteFactory.create(agency=a, name="kept")
    with tenancy.agency_context(a.id):
        assert _sites() == ["a1", "kept"]


def _step_that_fails(agency_id: uuid.UUID) -> None:
    with tenancy.agency_context(agency_id, then=[f"SAVEPOINT {SAVEPOINT}"], defer=True):
        assert _sites() == []
        with tenancy.released() as released:
            assert released is True
        SiteFactory.create(agency_id=agency_id, name="not-kept")
        raise RuntimeError("the step fails")


def test_a_write_after_the_release_rolls_back_with_the_block(live_db: None) -> None:
    a = AgencyFactory.create()
    with pytest.raises(RuntimeError):
        _step_that_fails(a.id)
    with tenancy.agency_context(a.id):
        assert _sites() == []


def test_a_block_that_wrote_first_keeps_its_transaction(live_db: None) -> None:
    a = AgencyFactory.create()
    with tenancy.agency_context(a.id, then=[f"SAVEPOINT {SAVEPOINT}"], defer=True):
        SiteFactory.create(agency=a, name="written-first")
        with tenancy.released() as released:
            assert released is False
            assert _state() == "idle in transaction"
        SiteFactory.create(agency=a, name="after")
    with tenancy.agency_context(a.id):
        assert _sites() == ["after", "written-first"]


def test_a_block_that_is_not_deferred_is_not_released(live_db: None) -> None:
    a = AgencyFactory.create()
    with tenancy.agency_context(a.id):
        assert _sites() == []
        with tenancy.released() as released:
            assert released is False
            assert _state() == "idle in transaction"
