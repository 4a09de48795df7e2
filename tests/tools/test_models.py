"""The tool registry: the 17 seeded system tools, who may read and write them, tool-call keys."""

from __future__ import annotations

import uuid

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.utils import ProgrammingError
from jsonschema import Draft202012Validator

from core import tenancy
from tests.factories import AgencyFactory
from tests.tools.factories import ToolCallFactory, ToolFactory
from tools.models import Tool, ToolCall, idempotency_key_for

pytestmark = pytest.mark.django_db

DEFAULT_TOOLS = {
    "crm_get_contact": ("crm", "module"),
    "crm_search_contacts": ("crm", "module"),
    "crm_create_contact": ("crm", "module"),
    "crm_update_contact": ("crm", "module"),
    "crm_add_note": ("crm", "module"),
    "email_send": ("communication", "module"),
    "email_draft": ("communication", "internal"),
    "calendar_create_event": ("calendar", "module"),
    "calendar_check_availability": ("calendar", "module"),
    "task_create": ("task", "internal"),
    "data_query": ("data", "internal"),
    "data_aggregate": ("data", "internal"),
    "web_search": ("web", "external"),
    "web_scrape": ("web", "external"),
    "wait": ("system", "internal"),
    "notify_user": ("system", "internal"),
    "trigger_workflow": ("system", "workflow"),
}


def test_the_seventeen_default_tools_are_system_tools() -> None:
    agency = AgencyFactory.create()
    with tenancy.agency_context(agency.id):
        tools = {tool.name: tool for tool in Tool.objects.filter(is_system=True)}
    assert len(DEFAULT_TOOLS) == 17
    seeded = {name: (t.category, t.handler_type) for name, t in tools.items()}
    # Later migrations may add system tools; these 17 are the seed's.
    assert {name: seeded.get(name) for name in DEFAULT_TOOLS} == DEFAULT_TOOLS
    for tool in tools.values():
        assert tool.agency_id is None
        assert tool.is_active
        Draft202012Validator.check_schema(tool.parameters_schema)
        assert tool.parameters_schema["type"] == "object"
        assert tool.handler_config
    assert tools["email_send"].parameters_schema["required"] == ["to", "subject", "body"]
    assert tools["wait"].parameters_schema["properties"]["seconds"]["maximum"] == 3600
    assert tools["crm_search_contacts"].handler_config == {
        "module": "crm",
        "action": "searchContacts",
    }
    assert tools["crm_create_contact"].requires_modules == ["crm"]
    assert tools["web_search"].handler_config["provider"] == "serper"
    # The seed's INSERT marks none dangerous; issue 4 makes email_send dangerous (tools 0004).
    assert {name for name, tool in tools.items() if tool.is_dangerous} == {"email_send"}


def _count(sql: str, params: list[str] | None = None) -> int:
    with connection.cursor() as cursor:
        cursor.execute(sql, params or [])
        return int(cursor.fetchone()[0])


def test_system_tools_are_visible_to_every_agency_but_nothing_without_a_tenant() -> None:
    a, b = AgencyFactory.create(), AgencyFactory.create()
    with tenancy.platform_context():
        platform_tools = _count("SELECT count(*) FROM tools_tool WHERE agency_id IS NULL")
    assert platform_tools >= 17
    for agency in (a, b):
        with tenancy.agency_context(agency.id):
            assert _count("SELECT count(*) FROM tools_tool") == platform_tools
    assert _count("SELECT count(*) FROM tools_tool") == 0


def test_agencies_cannot_insert_update_or_delete_system_tools() -> None:
    agency = AgencyFactory.create()
    with tenancy.agency_context(agency.id), connection.cursor() as cursor:
        with pytest.raises(ProgrammingError, match="row-level security"), transaction.atomic():
            cursor.execute(
                "INSERT INTO tools_tool (id, agency_id, name, display_name, description, category,"
                " parameters_schema, handler_type, handler_config, requires_permissions,"
                " requires_modules, is_dangerous, is_system, is_active, created_at, updated_at)"
                " VALUES (%s, NULL, 'smuggled_tool', 'x', 'x', 'custom', '{}', 'internal', '{}',"
                " '{}', '{}', false, true, true, now(), now())",
                [str(uuid.uuid4())],
            )
        cursor.execute("UPDATE tools_tool SET is_active = false WHERE agency_id IS NULL")
        assert cursor.rowcount == 0
        cursor.execute("DELETE FROM tools_tool WHERE name = 'email_send'")
        assert cursor.rowcount == 0
        # Moving an own tool into the platform scope is refused too.
        own = ToolFactory.create(agency=agency)
        with pytest.raises(ProgrammingError, match="row-level security"), transaction.atomic():
            cursor.execute(
                "UPDATE tools_tool SET agency_id = NULL, is_system = true WHERE id = %s", [own.pk]
            )
        cursor.execute("SELECT is_active FROM tools_tool WHERE name = 'email_send'")
        assert cursor.fetchone() == (True,)
        cursor.execute("SELECT count(*) FROM tools_tool WHERE NOT is_active")
        assert cursor.fetchone() == (0,)


def test_an_agencys_own_tools_are_invisible_to_other_agencies() -> None:
    own = ToolFactory.create()
    assert own.agency_id is not None
    other = AgencyFactory.create()
    with tenancy.agency_context(other.id):
        assert not Tool.objects.filter(pk=own.pk).exists()
        platform_tools = Tool.objects.filter(agency__isnull=True).count()
        assert Tool.objects.count() == platform_tools
    with tenancy.agency_context(own.agency_id):
        assert Tool.objects.count() == platform_tools + 1
        assert Tool.objects.filter(pk=own.pk).exists()


def test_a_system_tool_has_no_agency_and_an_agency_tool_is_not_system() -> None:
    with pytest.raises(IntegrityError, match="system_iff_platform"), transaction.atomic():
        ToolFactory.create(is_system=True)


def test_tool_names_must_be_function_names() -> None:
    with pytest.raises(IntegrityError, match="tools_tool_name_format"), transaction.atomic():
        ToolFactory.create(name="Send E-mail!")


def test_tool_call_idempotency_key_is_unique() -> None:
    call = ToolCallFactory.create(tool_call_id="call_abc")
    assert call.idempotency_key == f"{call.execution_id}:call_abc"
    assert call.idempotency_key == idempotency_key_for(call.execution_id, "call_abc")
    with tenancy.agency_context(call.agency_id):
        with pytest.raises(IntegrityError, match="idempotency_key"), transaction.atomic():
            ToolCall.objects.create(
                agency_id=call.agency_id,
                agent_id=call.agent_id,
                execution_id=call.execution_id,
                tool_name=call.tool_name,
                tool_call_id="call_abc",
                idempotency_key=call.idempotency_key,
            )
        assert ToolCall.objects.filter(execution_id=call.execution_id).count() == 1


def test_the_idempotency_key_has_one_index_the_unique_one() -> None:
    """No LIKE-only twin (``varchar_pattern_ops``): every tool call would write it for nothing."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexdef FROM pg_indexes WHERE tablename = 'tools_toolcall'"
            " AND indexdef LIKE '%%(idempotency_key%%'"
        )
        definitions = [row[0] for row in cursor.fetchall()]
    assert len(definitions) == 1, definitions
    assert definitions[0].startswith("CREATE UNIQUE INDEX")
