"""Deferred tenant settings: BEGIN, the settings and the block's ``then`` statements travel with
the block's first query (the runtime's step transactions). Outermost blocks only, so these tests
run on committed data (``live_db``), outside a test transaction."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection
from psycopg import pq

from core import tenancy
from core.models import Site
from tests.factories import AgencyFactory, SiteFactory
from tests.protocol import round_trips


def _sites_seen() -> list[str]:
    return sorted(Site.objects.values_list("name", flat=True))


@pytest.mark.parametrize("defer", [False, True])
def test_deferred_settings_cost_no_round_trip_of_their_own(live_db: None, defer: bool) -> None:
    a, b = AgencyFactory.create(), AgencyFactory.create()
    SiteFactory.create(agency=a, name="a1")
    SiteFactory.create(agency=b, name="b1")
    with round_trips() as syncs, tenancy.agency_context(a.id, defer=defer):
        assert _sites_seen() == ["a1"]
    # Settings + query, then COMMIT: two round trips deferred, three otherwise.
    assert syncs == [2 if defer else 3]


def test_deferred_savepoint_is_there_for_the_block_to_roll_back_to(live_db: None) -> None:
    a = AgencyFactory.create()
    with tenancy.agency_context(a.id, then=["SAVEPOINT deferred_sp"], defer=True):
        SiteFactory.create(agency=a, name="kept-out")  # the first query: settings, savepoint, it
        with connection.cursor() as cursor:
            cursor.execute("ROLLBACK TO SAVEPOINT deferred_sp")
        SiteFactory.create(agency=a, name="kept")
    with tenancy.agency_context(a.id):
        assert _sites_seen() == ["kept"]


def test_deferred_settings_before_a_server_side_cursor_and_with_no_query(live_db: None) -> None:
    a, b = AgencyFactory.create(), AgencyFactory.create()
    SiteFactory.create(agency=a, name="a1")
    SiteFactory.create(agency=b, name="b1")
    with tenancy.agency_context(b.id, defer=True):
        # .iterator() opens a named (server-side) cursor, which cannot run in a pipeline.
        assert [s.name for s in Site.objects.iterator(chunk_size=10)] == ["b1"]
    with tenancy.agency_context(a.id, defer=True):
        pass  # nothing was sent, nothing to commit
    assert connection.connection.info.transaction_status == pq.TransactionStatus.IDLE
    with tenancy.agency_context(a.id, defer=True):
        assert _sites_seen() == ["a1"]


def test_deferred_settings_fail_closed_and_end_with_their_block(live_db: None) -> None:
    a = AgencyFactory.create()
    SiteFactory.create(agency=a, name="a1")
    with (
        pytest.raises(DatabaseError),
        tenancy.agency_context(a.id, defer=True),
        connection.cursor() as cursor,
    ):
        cursor.execute("SELECT 1/0")  # the first query fails: the block's transaction ends
    assert connection.connection.info.transaction_status == pq.TransactionStatus.IDLE
    with tenancy.tenant_context():
        assert _sites_seen() == []  # the failed block's tenant did not outlive it


@pytest.mark.parametrize("defer", [False, True])
def test_a_block_leaves_the_connection_as_django_expects_it(live_db: None, defer: bool) -> None:
    """BEGIN goes out with the settings on a connection switched to autocommit for the moment;
    after the block, committed or failed, psycopg and Django agree again: idle, autocommit."""
    a = AgencyFactory.create()
    with tenancy.agency_context(a.id, defer=defer):
        SiteFactory.create(agency=a, name="a1")
        with tenancy.agency_context(a.id):  # a nested block is a savepoint of the same transaction
            SiteFactory.create(agency=a, name="a2")

    def fails_after_a_write() -> None:
        with tenancy.agency_context(a.id, defer=defer):
            SiteFactory.create(agency=a, name="a3")
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1/0")

    with pytest.raises(DatabaseError):
        fails_after_a_write()
    raw = connection.connection
    assert raw.info.transaction_status == pq.TransactionStatus.IDLE
    assert raw.autocommit
    assert connection.get_autocommit()
    with tenancy.agency_context(a.id):
        assert _sites_seen() == ["a1", "a2"]  # the failed block's row was rolled back


def test_deferred_settings_lead_a_query_in_a_pipeline_opened_elsewhere(live_db: None) -> None:
    a, b = AgencyFactory.create(), AgencyFactory.create()
    SiteFactory.create(agency=a, name="a1")
    SiteFactory.create(agency=b, name="b1")
    with tenancy.agency_context(a.id, defer=True), connection.cursor() as cursor:
        with connection.connection.pipeline():
            cursor.execute("SELECT name FROM core_site")
        assert cursor.fetchall() == [("a1",)]
