"""The audit log in the admin: agency admins read it (searchable, filterable), nobody adds,
changes or deletes an entry, and another agency's entries are not there."""

from __future__ import annotations

import pytest
from django.test import Client

from audit.models import AuditEntry
from audit.services import audit_record
from core import tenancy
from core.models import Role
from tests.admin.helpers import admin_url, change_url
from tests.factories import AgencyFactory, MembershipFactory

pytestmark = pytest.mark.django_db


def _login(role: str) -> tuple[Client, object]:
    membership = MembershipFactory.create(role=role)
    client = Client()
    client.force_login(membership.user)
    return client, membership.agency


def test_an_admin_searches_and_filters_its_agencys_log_and_sees_no_other() -> None:
    client, agency = _login(Role.ADMIN)
    audit_record(action="risk_rule.updated", agency_id=agency.pk, object_repr="Mail rule")  # type: ignore[attr-defined]
    audit_record(action="risk_rule.updated", agency_id=AgencyFactory.create().pk,
                 object_repr="Their rule")  # fmt: skip
    url = admin_url(AuditEntry, "changelist")
    page = client.get(url, {"q": "rule"})
    assert page.status_code == 200
    assert b"Mail rule" in page.content
    assert b"Their rule" not in page.content
    filtered = client.get(url, {"action": "risk_rule.updated"})
    assert b"Mail rule" in filtered.content


def test_an_entry_is_read_only_for_everyone() -> None:
    client, agency = _login(Role.ADMIN)
    entry = audit_record(action="x.y", agency_id=agency.pk, changes={"a": [1, 2]})  # type: ignore[attr-defined]
    page = client.get(change_url(entry))
    assert page.status_code == 200
    assert b"x.y" in page.content
    assert client.post(change_url(entry), {"action": "forged"}).status_code == 403
    assert client.get(admin_url(AuditEntry, "add")).status_code == 403
    assert (
        client.post(admin_url(AuditEntry, "delete", entry.pk), {"post": "yes"}).status_code == 403
    )
    with tenancy.agency_context(agency.pk):  # type: ignore[attr-defined]
        assert AuditEntry.objects.get(pk=entry.pk).action == "x.y"


@pytest.mark.parametrize("role", [Role.STAFF, Role.VIEWER, Role.APPROVER])
def test_other_roles_do_not_see_the_log(role: str) -> None:
    client, _ = _login(role)
    assert client.get(admin_url(AuditEntry, "changelist")).status_code == 403
