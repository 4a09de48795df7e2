"""Approvals: the pending queue's partial index, one pending approval per call, decisions."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from approvals.models import Approval, ApprovalStatus, RiskLevel, RiskRule
from core import tenancy
from tests.approvals.factories import ApprovalFactory, RiskRuleFactory
from tests.factories import AgencyFactory, UserFactory

pytestmark = pytest.mark.django_db


def test_pending_approvals_have_a_partial_index() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexdef FROM pg_indexes"
            " WHERE tablename = 'approvals_approval' AND indexname = 'approvals_pending_idx'"
        )
        (definition,) = cursor.fetchone()
    assert "(status, site_id)" in definition
    assert "WHERE ((status)::text = 'pending'::text)" in definition


def test_one_pending_approval_per_tool_call() -> None:
    approval = ApprovalFactory.create()
    with (
        pytest.raises(IntegrityError, match="one_pending_per_call"),
        transaction.atomic(),
    ):
        ApprovalFactory.create(tool_call=approval.tool_call)
    # Once decided, a new request for the same call (e.g. after expiry) is possible.
    with tenancy.agency_context(approval.agency_id):
        Approval.objects.filter(pk=approval.pk).update(status=ApprovalStatus.EXPIRED)
    ApprovalFactory.create(tool_call=approval.tool_call)


def test_a_decision_needs_a_time_and_pending_has_none() -> None:
    approval = ApprovalFactory.create()
    user = UserFactory.create()
    with tenancy.agency_context(approval.agency_id):
        rows = Approval.objects.filter(pk=approval.pk)
        with pytest.raises(IntegrityError, match="decision_consistent"), transaction.atomic():
            rows.update(status=ApprovalStatus.APPROVED)
        with pytest.raises(IntegrityError, match="decision_consistent"), transaction.atomic():
            rows.update(decided_at=timezone.now())
        rows.update(
            status=ApprovalStatus.DENIED,
            decided_at=timezone.now(),
            decided_by=user,
            decision_reason="Too many recipients",
        )
        assert rows.get().decision_reason == "Too many recipients"


def test_approval_factory_keeps_the_whole_chain_in_one_agency() -> None:
    approval = ApprovalFactory.create()
    assert approval.tool_call is not None
    assert (
        approval.agency_id
        == approval.execution.agency_id
        == approval.tool_call.agency_id
        == approval.agent.agency_id
        == approval.site.agency_id
    )
    other = AgencyFactory.create()
    with tenancy.agency_context(other.id):
        assert not Approval.objects.filter(pk=approval.pk).exists()


def test_seed_risk_rules_are_platform_rules_every_agency_reads() -> None:
    own = RiskRuleFactory.create(name="Any e-mail", tool_pattern="email_*")
    other = AgencyFactory.create()
    with tenancy.agency_context(other.id):
        platform = {rule.tool_pattern: rule for rule in RiskRule.objects.all()}
    assert {"email_send", "crm_delete_*", "data_export", "settings_*"} <= set(platform)
    assert own.pk not in {rule.pk for rule in platform.values()}
    bulk = platform["email_send"]
    assert bulk.condition == {"argument": "to", "min_items": 10}
    assert (bulk.risk_level, bulk.requires_approval) == (RiskLevel.HIGH, True)
    assert platform["crm_delete_*"].risk_level == RiskLevel.CRITICAL
    assert platform["settings_*"].requires_approval is False
    with tenancy.agency_context(other.id), connection.cursor() as cursor:
        cursor.execute("UPDATE approvals_riskrule SET is_active = false")
        assert cursor.rowcount == 0
