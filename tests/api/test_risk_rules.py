"""Risk rules over REST: members read the agency's rules and the platform's; staff and admins
write the agency's own with the admin form's checks; platform rules are read-only to agencies."""

from __future__ import annotations

import pytest

from approvals.models import RiskRule
from core import tenancy
from core.models import Role
from tests.api.conftest import count, fields_of, token_client
from tests.approvals.factories import RiskRuleFactory

URL = "/api/v1/risk-rules/"
RULE = {
    "name": "Bulk e-mail",
    "tool_pattern": "email_*",
    "condition": {"argument": "to", "min_items": 10},
    "risk_level": "high",
    "priority": 50,
}


def _platform_rule() -> RiskRule:
    with tenancy.platform_context():
        rule = RiskRule.objects.filter(agency__isnull=True).first()
    assert rule is not None  # seeded by the data migration
    return rule


def test_staff_create_list_change_and_delete_a_rule(tenant_a, as_role) -> None:
    client = as_role(Role.STAFF)
    created = client.post(URL, RULE, format="json")
    assert created.status_code == 201, created.json()
    data = created.json()
    assert data["is_platform"] is False
    assert data["condition"] == RULE["condition"]
    listed = client.get(URL, {"is_platform": "false"}).json()["results"]
    assert [r["id"] for r in listed] == [data["id"]]
    everything = client.get(URL, {"page_size": 100}).json()["results"]
    assert any(r["is_platform"] for r in everything)

    changed = client.patch(f"{URL}{data['id']}/", {"risk_level": "critical"}, format="json")
    assert changed.status_code == 200, changed.json()
    assert changed.json()["risk_level"] == "critical"
    assert client.delete(f"{URL}{data['id']}/").status_code == 204
    assert count(RiskRule, agency=tenant_a.agency) == 0


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({"tool_pattern": "email send"}, "tool_pattern", ""),
        ({"condition": ["to"]}, "condition", "JSON object"),
        ({"condition": {"argument": "to", "min_items": -1}}, "condition", "min_items"),
        ({"condition": {"min_items": 3}}, "condition", "argument"),
        ({"condition": {"argument": "to", "oops": 1}}, "condition", "Unknown key"),
        ({"risk_level": "extreme"}, "risk_level", "valid choice"),
        ({"priority": -1}, "priority", ""),
        ({"name": ""}, "name", ""),
    ],
)
def test_bad_rules_are_400_with_a_message_and_nothing_written(
    tenant_a, as_role, body, field, message
) -> None:
    response = as_role(Role.STAFF).post(URL, {**RULE, **body}, format="json")
    errors = fields_of(response)
    assert field in errors, errors
    assert message in " ".join(str(e) for e in errors[field])
    assert response.json()["message"].startswith("Invalid input.")
    assert count(RiskRule, agency=tenant_a.agency) == 0


def test_a_duplicate_name_is_a_field_error(tenant_a, as_role) -> None:
    RiskRuleFactory.create(agency=tenant_a.agency, name="Bulk e-mail")
    errors = fields_of(as_role(Role.ADMIN).post(URL, RULE, format="json"), 409)
    assert "already exists" in errors["name"][0]
    assert count(RiskRule, agency=tenant_a.agency) == 1


def test_platform_rules_are_read_only_to_agencies(tenant_a, as_role) -> None:
    rule = _platform_rule()
    client = as_role(Role.ADMIN)
    assert client.get(f"{URL}{rule.id}/").json()["is_platform"] is True
    refused = client.patch(f"{URL}{rule.id}/", {"is_active": False}, format="json")
    assert refused.status_code == 403
    assert "superusers" in refused.json()["message"]
    assert client.delete(f"{URL}{rule.id}/").status_code == 403
    with tenancy.platform_context():
        assert RiskRule.objects.get(pk=rule.id).is_active == rule.is_active


def test_platform_rules_are_read_only_over_the_api_even_to_superusers(tenant_a, superuser) -> None:
    rule = _platform_rule()
    client = token_client(superuser)
    url = f"{URL}{rule.id}/?agency={tenant_a.agency.id}"
    assert client.get(url).status_code == 200
    response = client.patch(url, {"priority": rule.priority + 1}, format="json")
    assert response.status_code == 403
    assert "in the admin" in response.json()["message"]


def test_another_agencys_rule_is_a_404(tenant_a, tenant_b, as_role) -> None:
    theirs = RiskRuleFactory.create(agency=tenant_b.agency)
    client = as_role(Role.ADMIN)
    assert client.get(f"{URL}{theirs.id}/").status_code == 404
    assert client.patch(f"{URL}{theirs.id}/", {"priority": 1}, format="json").status_code == 404
    assert client.delete(f"{URL}{theirs.id}/").status_code == 404
    ids = {r["id"] for r in client.get(URL, {"page_size": 100}).json()["results"]}
    assert str(theirs.id) not in ids
    assert count(RiskRule, pk=theirs.id) == 1


@pytest.mark.parametrize("role", [Role.APPROVER, Role.VIEWER])
def test_approvers_and_viewers_only_read_rules(tenant_a, as_role, role) -> None:
    rule = RiskRuleFactory.create(agency=tenant_a.agency)
    client = as_role(role)
    assert client.get(f"{URL}{rule.id}/").status_code == 200
    assert client.post(URL, RULE, format="json").status_code == 403
    assert client.patch(f"{URL}{rule.id}/", {"priority": 1}, format="json").status_code == 403
    assert client.delete(f"{URL}{rule.id}/").status_code == 403
