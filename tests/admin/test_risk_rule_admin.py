"""The risk rule admin checks a rule's condition as the API does: a malformed one is refused."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.test import Client
from django.urls import reverse

from approvals.models import RiskRule
from core import tenancy
from core.models import Agency, Role, User
from tests.admin.conftest import member

pytestmark = pytest.mark.django_db


def rule_form(condition: str) -> dict[str, str]:
    return {
        "name": "Bulk e-mail",
        "description": "",
        "tool_pattern": "email_send",
        "condition": condition,
        "risk_level": "high",
        "requires_approval": "on",
        "priority": "10",
        "is_active": "on",
    }


@pytest.mark.parametrize(
    ("condition", "message"),
    [
        ("[1]", "Must be a JSON object."),
        ('{"argument": "to", "min_items": "x"}', "&#x27;min_items&#x27; must be a whole number"),
        ('{"min_items": 3}', "Name the argument to test"),
        ('{"argument": "to", "colour": 1}', "Unknown key"),
    ],
)
def test_a_malformed_condition_is_refused_and_nothing_is_saved(
    login: Callable[[User], Client], agency: Agency, condition: str, message: str
) -> None:
    client = login(member(agency, Role.ADMIN))
    response = client.post(reverse("admin:approvals_riskrule_add"), rule_form(condition))
    assert response.status_code == 200  # the form again, with the error
    assert message in response.content.decode()
    with tenancy.agency_context(agency.id):
        assert not RiskRule.objects.filter(agency=agency).exists()


def test_a_valid_condition_is_saved(login: Callable[[User], Client], agency: Agency) -> None:
    client = login(member(agency, Role.ADMIN))
    response = client.post(
        reverse("admin:approvals_riskrule_add"),
        rule_form('{"argument": "to", "min_items": 10}'),
    )
    assert response.status_code == 302
    with tenancy.agency_context(agency.id):
        rule = RiskRule.objects.get(agency=agency)
    assert rule.condition == {"argument": "to", "min_items": 10}
