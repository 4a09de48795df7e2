"""The chain: entries hash the one before, under RLS, append-only, verified, purged with an
anchor."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.db.utils import DatabaseError

from audit.context import Actor, actor_context
from audit.models import ActorType, AuditChain, AuditEntry
from audit.services import audit_record
from core import tenancy
from core.models import Agency
from tests.factories import AgencyFactory

pytestmark = pytest.mark.django_db


def _record(agency: Agency, n: int = 3) -> list[AuditEntry]:
    return [
        audit_record(
            action="test.thing_changed",
            agency_id=agency.pk,
            object_type="tests.thing",
            object_id=str(i),
            changes={"n": [i - 1, i], "ratio": [0.5, 1.0]},
        )
        for i in range(1, n + 1)
    ]


def _verify(*args: str) -> tuple[int, str]:
    out, err = StringIO(), StringIO()
    try:
        call_command("audit_verify", *args, stdout=out, stderr=err)
    except SystemExit as exit_:
        return int(exit_.code or 0), out.getvalue() + err.getvalue()
    return 0, out.getvalue() + err.getvalue()


def test_entries_chain_each_hash_to_the_one_before() -> None:
    agency = AgencyFactory.create()
    first, second, third = _record(agency)
    assert [second.seq, third.seq] == [first.seq + 1, first.seq + 2]
    assert (second.prev_hash, third.prev_hash) == (first.hash, second.hash)
    assert first.actor_type == ActorType.SYSTEM  # no request: the system acted
    with tenancy.agency_context(agency.pk):
        chain = AuditChain.objects.get(agency=agency)
    assert (chain.head_seq, chain.head_hash) == (third.seq, third.hash)
    assert _verify("--agency", str(agency.pk))[0] == 0


def test_another_agency_sees_none_of_the_entries() -> None:
    a, b = AgencyFactory.create(), AgencyFactory.create()
    _record(a, 2)
    audit_record(action="auth.login", agency_id=None)  # the platform chain
    with tenancy.agency_context(b.pk):
        assert {e.agency_id for e in AuditEntry.objects.all()} == {b.pk}  # its agency.created
        assert {c.agency_id for c in AuditChain.objects.all()} == {b.pk}
    with tenancy.agency_context(a.pk):
        assert AuditEntry.objects.filter(action="test.thing_changed").count() == 2
        assert not AuditEntry.objects.filter(agency__isnull=True).exists()
    with connection.cursor() as cursor:  # no tenant at all: nothing
        cursor.execute("SELECT count(*) FROM audit_auditentry")
        assert cursor.fetchone() == (0,)
    with tenancy.platform_context():
        assert AuditEntry.objects.filter(agency__isnull=True).count() == 1


def test_an_agency_cannot_write_into_another_agencys_chain() -> None:
    a, b = AgencyFactory.create(), AgencyFactory.create()
    (entry,) = _record(a, 1)
    with pytest.raises(DatabaseError), tenancy.agency_context(b.pk):
        AuditEntry.objects.create(
            agency=a, seq=2, at=entry.at, actor_type=ActorType.SYSTEM, action="forged", hash="x"
        )


@pytest.mark.parametrize(
    "statement", ["UPDATE audit_auditentry SET action = 'x'", "DELETE FROM audit_auditentry"]
)
def test_the_runtime_role_can_neither_change_nor_delete_an_entry(statement: str) -> None:
    agency = AgencyFactory.create()
    _record(agency, 1)
    with (
        pytest.raises(DatabaseError, match="append-only"),
        tenancy.agency_context(agency.pk),
        connection.cursor() as cursor,
    ):
        cursor.execute(statement)


def test_the_actor_is_the_one_in_context() -> None:
    agency = AgencyFactory.create()
    actor = Actor(ActorType.USER, user_id=7, display="ann", ip="192.0.2.1", user_agent="UA/1")
    with actor_context(actor):
        entry = audit_record(action="x.y", agency_id=agency.pk)
    assert (entry.actor_user_id, entry.actor_display, entry.ip) == (7, "ann", "192.0.2.1")


def test_deleting_the_agency_deletes_its_entries_and_records_it_on_the_platform_chain() -> None:
    from core.services import agency_delete

    agency = AgencyFactory.create()
    agency_id = agency.pk
    _record(agency, 2)
    with transaction.atomic():
        agency_delete(agency=agency)
    with tenancy.platform_context():
        assert not AuditEntry.objects.filter(agency_id=agency_id).exists()
        assert not AuditChain.objects.filter(agency_id=agency_id).exists()
        deleted = AuditEntry.objects.get(
            agency__isnull=True, action="agency.deleted", object_id=str(agency_id)
        )
    assert deleted.object_id == str(agency_id)
