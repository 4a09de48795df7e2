"""What the API takes is what its schema says (issue 25 item 9), one rule at a time: values are
not converted to the schema's type, filters and page sizes it cannot use are refused, not
ignored, a well-formed id of nothing filters to nothing, PATCH {} changes nothing, and the schema
states what the server checks (closed request bodies, decimal and header patterns, the answers
every operation may give). tests/api/test_contract.py checks the whole API from outside."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import pytest
from rest_framework.test import APIClient

from approvals.models import RiskRule
from core.models import Role
from tests.api.conftest import Tenant, count, fields_of
from tests.usage.factories import BudgetFactory

RULE = {"name": "Bulk e-mail", "tool_pattern": "email_*", "risk_level": "high"}


def _schema() -> dict[str, Any]:
    response = APIClient().get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    schema: dict[str, Any] = json.loads(response.content)
    return schema


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("name", 0),  # was stored as "0"
        ("requires_approval", 0),  # was False
        ("requires_approval", "yes"),  # was True
        ("priority", "50"),  # was 50
        ("risk_level", 1),
    ],
)
def test_a_value_of_another_json_type_is_refused_not_converted(
    tenant_a: Tenant, as_role: Any, field: str, value: Any
) -> None:
    response = as_role(Role.ADMIN).post(
        "/api/v1/risk-rules/", {**RULE, field: value}, format="json"
    )
    assert field in fields_of(response)
    assert count(RiskRule, agency=tenant_a.agency) == 0


@pytest.mark.parametrize("value", ["", "-1", "1e3", "0000000000001", "1.", 20, "20.00001"])
def test_a_decimal_is_a_string_matching_the_schemas_pattern(
    tenant_a: Tenant, as_role: Any, value: Any
) -> None:
    response = as_role(Role.ADMIN).post("/api/v1/budgets/", {"limit_usd": value}, format="json")
    assert "limit_usd" in fields_of(response)
    pattern = _schema()["components"]["schemas"]["BudgetCreateRequest"]["properties"]
    pattern = pattern["limit_usd"]["pattern"]
    assert not (isinstance(value, str) and re.fullmatch(pattern, value)), pattern
    assert re.fullmatch(pattern, "20.00")
    assert re.fullmatch(pattern, "20")


@pytest.mark.parametrize(
    "query",
    [
        {"page_size": "abc"},
        {"page_size": "0"},
        {"is_active": "maybe"},
        {"is_active": ""},
        {"site": ""},
        {"agent_type": ""},
        {"ordering": ["name", "created_at"]},  # given twice
        {"is_active": ["true", "false"]},
    ],
)
def test_a_list_parameter_it_cannot_use_is_refused_not_ignored(
    tenant_a: Tenant, as_role: Any, query: dict[str, Any]
) -> None:
    response = as_role(Role.VIEWER).get("/api/v1/agents/", query)
    assert set(query) <= set(fields_of(response)), response.json()


def test_a_well_formed_id_of_nothing_filters_to_nothing(tenant_a: Tenant, as_role: Any) -> None:
    client = as_role(Role.VIEWER)
    for url, name in [
        ("/api/v1/agents/", "site"),
        ("/api/v1/executions/", "agent"),
        ("/api/v1/approvals/", "execution"),
        ("/api/v1/questions/", "agent"),
        ("/api/v1/events/", "site"),
    ]:
        response = client.get(url, {name: str(uuid.uuid4())})
        assert response.status_code == 200, (url, response.json())
        assert response.json()["count"] == 0


def test_a_page_size_past_the_cap_gives_the_cap(tenant_a: Tenant, as_role: Any) -> None:
    response = as_role(Role.VIEWER).get("/api/v1/tools/", {"page_size": "1000"})
    assert response.status_code == 200
    assert len(response.json()["results"]) <= 100


def test_patch_with_nothing_changes_nothing(tenant_a: Tenant, as_role: Any) -> None:
    client = as_role(Role.ADMIN)
    budget = BudgetFactory.create(agency=tenant_a.agency)
    response = client.patch(f"/api/v1/budgets/{budget.id}/", {}, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["limit_usd"] == f"{budget.limit_usd:.4f}"
    member = client.get("/api/v1/members/", {"role": Role.STAFF}).json()["results"][0]
    response = client.patch(f"/api/v1/members/{member['id']}/", {}, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["role"] == Role.STAFF


@pytest.mark.parametrize("value", [" ", "\t\n", "\u00a0"])
def test_text_that_is_blank_once_stripped_is_refused_and_the_schema_says_so(
    tenant_a: Tenant, as_role: Any, value: str
) -> None:
    """Found by a longer schemathesis hunt: a capability " " met the schema (minLength 1) and
    the server refused it (stripped, it is blank)."""
    response = as_role(Role.ADMIN).post(
        "/api/v1/risk-rules/", {**RULE, "name": value}, format="json"
    )
    assert "name" in fields_of(response)
    components = _schema()["components"]["schemas"]
    capability = components["AgentWriteRequest"]["properties"]["capabilities"]["items"]
    name = components["RiskRuleWriteRequest"]["properties"]["name"]
    for pattern in (capability["pattern"], name["pattern"]):
        assert not re.fullmatch(pattern, value)
        assert re.fullmatch(pattern, " a ")
        assert not re.fullmatch(pattern, "a\x00")


def test_the_schema_states_what_the_server_checks(db: None) -> None:
    schema = _schema()
    components = schema["components"]["schemas"]
    # A body key that is not a field is refused: the schema says so.
    assert components["RiskRuleWriteRequest"]["additionalProperties"] is False
    assert components["PatchedBudgetUpdateRequest"]["additionalProperties"] is False
    # Decimals: no sign where none is taken, at least one digit, the range where it is small.
    temperature = components["AgentWriteRequest"]["properties"]["temperature"]["pattern"]
    assert [
        v for v in ["0", "1.5", "2", "2.00", "2.01", "-1", "", "3"] if re.fullmatch(temperature, v)
    ] == ["0", "1.5", "2", "2.00"]
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            # The README's promise: throttled, unexpected and unavailable are documented.
            assert {"429", "500", "503"} <= set(operation["responses"]), (method, path)
            for parameter in operation.get("parameters", []):
                if parameter["name"] == "Idempotency-Key":
                    pattern = parameter["schema"]["pattern"]
                    assert re.fullmatch(pattern, "3f2a-retry-1")
                    assert not re.fullmatch(pattern, "clé")
                    assert not re.fullmatch(pattern, "x" * 256)
