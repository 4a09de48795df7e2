"""The tool registry over REST: members read system + own tools; superusers edit agency tools
(with the parameter schema checked as JSON Schema)."""

from __future__ import annotations

import pytest

from core import tenancy
from core.models import Role
from tests.api.conftest import count, fields_of, token_client
from tests.tools.factories import ToolFactory
from tools.models import Tool

URL = "/api/v1/tools/"
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def _tool_body(**extra: object) -> dict[str, object]:
    return {
        "name": "weather_lookup",
        "display_name": "Weather",
        "description": "Current weather for a city.",
        "category": "web",
        "handler_type": "external",
        "parameters_schema": SCHEMA,
        **extra,
    }


def test_members_see_system_tools_and_their_own_only(tenant_a, tenant_b, as_role) -> None:
    mine = ToolFactory.create(agency=tenant_a.agency, name="mine_tool")
    ToolFactory.create(agency=tenant_b.agency, name="their_tool")
    client = as_role(Role.VIEWER)
    names = {t["name"] for t in client.get(URL, {"page_size": 100}).json()["results"]}
    assert "mine_tool" in names
    assert "their_tool" not in names
    with tenancy.platform_context():
        system = Tool.objects.filter(is_system=True).count()
    assert system > 0
    assert len(names) == system + 1
    assert client.get(f"{URL}{mine.id}/").json()["is_system"] is False
    assert "handler_config" not in client.get(f"{URL}{mine.id}/").json()
    only_mine = client.get(URL, {"is_system": "false"}).json()["results"]
    assert [t["name"] for t in only_mine] == ["mine_tool"]


def test_another_agencys_tool_is_a_404(tenant_b, as_role) -> None:
    theirs = ToolFactory.create(agency=tenant_b.agency)
    assert as_role(Role.ADMIN).get(f"{URL}{theirs.id}/").status_code == 404


@pytest.mark.parametrize("role", [Role.ADMIN, Role.STAFF, Role.VIEWER])
def test_members_cannot_write_tools(tenant_a, as_role, role) -> None:
    assert as_role(role).post(URL, _tool_body(), format="json").status_code == 403
    mine = ToolFactory.create(agency=tenant_a.agency)
    assert as_role(role).patch(f"{URL}{mine.id}/", {}, format="json").status_code == 403
    assert count(Tool, agency=tenant_a.agency) == 1


def test_superuser_creates_changes_and_deletes_an_agency_tool(tenant_a, superuser) -> None:
    client = token_client(superuser)
    scoped = f"?agency={tenant_a.agency.id}"
    created = client.post(f"{URL}{scoped}", _tool_body(), format="json")
    assert created.status_code == 201, created.json()
    tool_id = created.json()["id"]
    assert created.json()["agency"] == str(tenant_a.agency.id)
    changed = client.patch(f"{URL}{tool_id}/{scoped}", {"is_dangerous": True}, format="json")
    assert changed.json()["is_dangerous"] is True
    assert client.delete(f"{URL}{tool_id}/{scoped}").status_code == 204
    assert count(Tool, pk=tool_id) == 0


@pytest.mark.parametrize(
    ("extra", "field", "status"),
    [
        ({"parameters_schema": {"type": "object", "properties": {"x": {"type": "strin"}}}},
         "parameters_schema", 400),
        ({"parameters_schema": {"type": "array"}}, "parameters_schema", 400),
        ({"parameters_schema": {"type": "object", "$ref": "https://example.com/s.json"}},
         "parameters_schema", 400),
        ({"parameters_schema": "{}"}, "parameters_schema", 400),
        ({"returns_schema": {"type": 12}}, "returns_schema", 400),
        ({"name": "Weather Lookup"}, "name", 400),
        ({"name": "web_search"}, "name", 409),  # a system tool's name: taken
        ({"is_system": True}, "is_system", 400),
    ],
)  # fmt: skip
def test_bad_tools_are_refused_and_nothing_is_written(
    tenant_a, superuser, extra, field, status
) -> None:
    client = token_client(superuser)
    response = client.post(f"{URL}?agency={tenant_a.agency.id}", _tool_body(**extra), format="json")
    assert field in fields_of(response, status)
    assert count(Tool, agency=tenant_a.agency) == 0


def test_system_tools_cannot_be_changed_through_the_api(tenant_a, superuser) -> None:
    with tenancy.platform_context():
        system = Tool.objects.filter(is_system=True).first()
    assert system is not None
    client = token_client(superuser)
    url = f"{URL}{system.id}/?agency={tenant_a.agency.id}"
    assert client.patch(url, {"is_active": False}, format="json").status_code == 404
    assert count(Tool, pk=system.id, is_active=True) == 1
