"""Tampering and the retention purge, with rows committed (the owner role's connection, which
may bypass the append-only trigger, must see them)."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

from audit.chain import entry_hash
from audit.models import AuditChain, AuditEntry
from audit.retention import purge_agency_entries
from core import tenancy
from core.models import Agency
from core.services import conninfo
from tests.audit.test_chain import _record, _verify
from tests.factories import AgencyFactory


@contextmanager
def _owner() -> Iterator[psycopg.Cursor]:
    """A connection as the owner role (migrations'), which sees every agency here."""
    with psycopg.connect(conninfo("owner"), autocommit=True) as conn, conn.cursor() as cursor:
        cursor.execute("SELECT set_config('app.all_agencies', 'on', false)")
        yield cursor


def test_a_row_changed_as_the_owner_is_detected_with_its_position(live_db: None) -> None:
    agency = AgencyFactory.create()
    entries = _record(agency, 3)
    assert _verify("--agency", str(agency.pk))[0] == 0
    with _owner() as cursor:  # the owner may bypass the trigger: the chain tells
        cursor.execute("ALTER TABLE audit_auditentry DISABLE TRIGGER audit_entry_append_only")
        cursor.execute(
            "UPDATE audit_auditentry SET object_repr = 'innocent' WHERE id = %s",
            [entries[1].pk],
        )
        cursor.execute("ALTER TABLE audit_auditentry ENABLE TRIGGER audit_entry_append_only")
    code, output = _verify("--agency", str(agency.pk))
    assert code != 0
    assert str(entries[1].pk) in output
    assert f"seq {entries[1].seq}" in output


def test_a_removed_row_is_detected(live_db: None) -> None:
    agency = AgencyFactory.create()
    entries = _record(agency, 3)
    with _owner() as cursor:  # the owner's own DELETE passes the trigger
        cursor.execute("DELETE FROM audit_auditentry WHERE id = %s", [entries[1].pk])
    code, output = _verify("--agency", str(agency.pk))
    assert code != 0
    assert str(entries[2].pk) in output


def test_purge_removes_only_entries_past_retention_and_the_chain_still_verifies(
    live_db: None,
) -> None:
    agency = AgencyFactory.create(audit_retention_days=30)
    entries = _record(agency, 4)
    old = entries[0].at - datetime.timedelta(days=31)
    with _owner() as cursor:  # back-date three entries (and re-hash: the content changed)
        cursor.execute("ALTER TABLE audit_auditentry DISABLE TRIGGER audit_entry_append_only")
        cursor.execute(
            "UPDATE audit_auditentry SET at = %s WHERE agency_id = %s AND seq <= 3",
            [old, agency.pk],
        )
        cursor.execute("ALTER TABLE audit_auditentry ENABLE TRIGGER audit_entry_append_only")
    _rehash(agency)
    # agency.created and the first two entries
    assert purge_agency_entries(agency_id=agency.pk) == 3
    with tenancy.agency_context(agency.pk):
        assert list(AuditEntry.objects.order_by("seq").values_list("seq", flat=True)) == [4, 5]
        chain = AuditChain.objects.get(agency=agency)
    assert chain.anchor_seq == 3
    assert _verify("--agency", str(agency.pk))[0] == 0


def _rehash(agency: Agency) -> None:
    """Re-chain an agency's entries as the owner (a test changed them on purpose)."""
    prev = ""
    with tenancy.agency_context(agency.pk):
        rows = list(AuditEntry.objects.order_by("seq"))
    with _owner() as cursor:
        cursor.execute("ALTER TABLE audit_auditentry DISABLE TRIGGER audit_entry_append_only")
        for row in rows:
            row.prev_hash = prev
            row.hash = entry_hash(row)
            prev = row.hash
            cursor.execute(
                "UPDATE audit_auditentry SET prev_hash = %s, hash = %s WHERE id = %s",
                [row.prev_hash, row.hash, row.pk],
            )
        cursor.execute("ALTER TABLE audit_auditentry ENABLE TRIGGER audit_entry_append_only")
        cursor.execute(
            "UPDATE audit_auditchain SET head_hash = %s WHERE agency_id = %s", [prev, agency.pk]
        )
