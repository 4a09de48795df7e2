"""Writers for an agency's own tools (system tools come from the data migration)."""

from __future__ import annotations

import uuid
from typing import Any

from django.db import IntegrityError, transaction
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from core.exceptions import ApplicationError
from tools.mcp.naming import PREFIX as MCP_PREFIX
from tools.models import Tool
from tools.validation import InvalidToolSchema, check_parameters_schema

EDITABLE_FIELDS = frozenset(
    {
        "name", "display_name", "description", "category", "parameters_schema",
        "returns_schema", "handler_type", "handler_config", "requires_permissions",
        "requires_modules", "rate_limit_per_minute", "rate_limit_per_hour", "is_dangerous",
        "is_active",
    }
)  # fmt: skip


def _invalid(fields: dict[str, list[str]], *, status: int = 400) -> ApplicationError:
    return ApplicationError("invalid", "The tool is invalid.", fields=fields, status=status)


def validate_tool_fields(fields: dict[str, Any]) -> None:
    """Schemas must be usable: a bad one is a 400 on its field, never a failure at run time."""
    unknown = set(fields) - EDITABLE_FIELDS
    if unknown:
        raise ApplicationError("invalid", f"Unknown tool fields: {sorted(unknown)}.")
    errors: dict[str, list[str]] = {}
    if "parameters_schema" in fields:
        try:
            check_parameters_schema(fields["parameters_schema"])
        except InvalidToolSchema as exc:
            errors["parameters_schema"] = [exc.message]
    returns = fields.get("returns_schema")
    if returns is not None:
        try:
            Draft202012Validator.check_schema(returns)
        except SchemaError as exc:
            errors["returns_schema"] = [f"Not valid JSON Schema (Draft 2020-12): {exc.message}"]
    if errors:
        raise _invalid(errors)


def _check_name(tool: Tool) -> None:
    """``mcp_`` names are the tools of MCP servers (``tools.mcp.naming``): the executor runs any
    tool so named with the MCP handler, so another tool may not take the prefix."""
    if tool.name.startswith(MCP_PREFIX) and tool.mcp_server_id is None:
        raise _invalid(
            {"name": [f"Names starting with {MCP_PREFIX!r} are reserved for MCP servers' tools."]}
        )


def _save(tool: Tool) -> Tool:
    try:
        with transaction.atomic():
            tool.save()
    except IntegrityError as exc:
        if "name" in str(exc):
            raise _invalid(
                {"name": [f"A tool named {tool.name!r} already exists."]}, status=409
            ) from exc
        raise
    return tool


@transaction.atomic
def tool_create(*, agency_id: uuid.UUID, **fields: Any) -> Tool:
    """Precondition: in the agency's context."""
    validate_tool_fields(fields)
    tool = Tool(agency_id=agency_id, is_system=False, **fields)
    _check_name(tool)
    return _save(tool)


@transaction.atomic
def tool_update(*, tool: Tool, **fields: Any) -> Tool:
    if tool.is_system:
        raise ApplicationError("forbidden", "System tools cannot be changed.", status=403)
    validate_tool_fields(fields)
    for name, value in fields.items():
        setattr(tool, name, value)
    if "name" in fields:
        _check_name(tool)
    return _save(tool)


@transaction.atomic
def tool_delete(*, tool: Tool) -> None:
    if tool.is_system:
        raise ApplicationError("forbidden", "System tools cannot be deleted.", status=403)
    tool.delete()
