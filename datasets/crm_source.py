"""A dataset over CRM entities: a query (entity type, filters, fields) that ``data_query``'s
allow-list checks (tools/builtin/_entities), run under the agency each time a tool reads it, so
the table is always current and row-level security applies to it as to every read."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any

from django.conf import settings

from core.exceptions import ApplicationError
from datasets.engine import Table
from tools.builtin._entities import ARRAY, DATETIME, JSON, NUMBER, compile_filters, entity_for
from tools.handlers import ToolError

_TYPES = {DATETIME: "TIMESTAMPTZ", NUMBER: "DOUBLE", ARRAY: "VARCHAR[]", JSON: "VARCHAR"}


def validate_query(query: Mapping[str, Any]) -> dict[str, Any]:
    """``{"entity_type", "filters"?, "fields"?}`` checked (400 naming the fault)."""
    if not isinstance(query, Mapping):
        raise ApplicationError("invalid_query", "query must be a JSON object.", status=422)
    unknown = sorted(set(query) - {"entity_type", "filters", "fields"})
    if unknown:
        raise ApplicationError(
            "invalid_query", f"query: unknown key(s) {', '.join(unknown)}.", status=422
        )
    try:
        entity = entity_for(query.get("entity_type"))
        compile_filters(entity, query.get("filters") or {})
    except ToolError as error:
        raise ApplicationError("invalid_query", f"query: {error.message}", status=422) from error
    fields = query.get("fields") or list(entity.fields)
    if not isinstance(fields, list) or not all(isinstance(f, str) for f in fields):
        raise ApplicationError(
            "invalid_query", "query.fields must be a list of field names.", status=422
        )
    bad = [f for f in fields if f not in entity.fields]
    if bad:
        raise ApplicationError(
            "invalid_query",
            f"query.fields: {', '.join(bad[:10])} not allowed; "
            f"allowed: {', '.join(entity.fields)}.",
            status=422,
        )
    return {
        "entity_type": query["entity_type"],
        "filters": query.get("filters") or {},
        "fields": list(dict.fromkeys(fields)),
    }


def table(name: str, query: Mapping[str, Any], agency_id: uuid.UUID) -> Table:
    """The query's rows now, as a table to load (at most AGENTDESK_DATASET_MAX_ROWS)."""
    entity = entity_for(query["entity_type"])
    fields: list[str] = list(query["fields"])
    limit = settings.AGENTDESK_DATASET_MAX_ROWS
    rows = (
        entity.queryset(agency_id)
        .filter(compile_filters(entity, query.get("filters") or {}))
        .order_by("created_at", "id")
        .values_list(*fields)[:limit]
    )
    kinds = [entity.fields[f].kind for f in fields]
    return Table(
        name=name,
        columns=[(f, _TYPES.get(kind, "VARCHAR")) for f, kind in zip(fields, kinds, strict=True)],
        rows=[tuple(_value(v, kind) for v, kind in zip(row, kinds, strict=True)) for row in rows],
    )


def _value(value: Any, kind: str) -> Any:
    if value is None or kind in (DATETIME, NUMBER):
        return value
    if kind == ARRAY:
        return [str(v) for v in value]
    if kind == JSON:
        return json.dumps(value, sort_keys=True, default=str)
    return str(value)
