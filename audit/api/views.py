"""``GET /api/v1/audit/entries/``: the audit log streamed as JSON Lines (default) or CSV
(``Accept: text/csv`` or ``?format=csv``), filtered; agency admins only.

The response streams after the view returns, when the request's transaction (and tenant) has
ended: the rows are read in a transaction of their own in the same tenant (a server-side
cursor). The export itself is recorded in the log (``audit.exported``, with its filters).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager
from typing import Any

from django.http import StreamingHttpResponse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from audit.chain import jsonable
from audit.models import ActorType, AuditEntry
from audit.selectors import audit_entries, iterate
from audit.services import audit_record
from core import tenancy
from core.api.base import TenantScopedView
from core.api.exceptions import RULE
from core.api.permissions import ADMIN_ROLES
from core.api.principal import Principal

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
COLUMNS = [
    "id", "agency", "seq", "at", "actor_type", "actor_user_id", "actor_api_key",
    "actor_display", "ip", "user_agent", "action", "object_type", "object_id", "object_repr",
    "changes", "prev_hash", "hash",
]  # fmt: skip


class _Stream(BaseRenderer):
    """Names a format for content negotiation; the view streams the body itself."""

    charset = "utf-8"

    def render(
        self, data: Any, accepted_media_type: Any = None, renderer_context: Any = None
    ) -> Any:
        return data


class JSONLinesRenderer(_Stream):
    media_type = "application/x-ndjson"
    format = "jsonl"


class AuditCSVRenderer(_Stream):
    media_type = "text/csv"
    format = "csv"


class AuditExportQuery(serializers.Serializer):
    since = serializers.DateTimeField(required=False, help_text="From this time on (inclusive).")
    until = serializers.DateTimeField(required=False, help_text="Before this time.")
    actor = serializers.CharField(
        required=False, max_length=255, help_text="A user's id or name, or an API key's prefix."
    )
    actor_type = serializers.ChoiceField(choices=ActorType.choices, required=False)
    action = serializers.CharField(
        required=False,
        max_length=64,
        help_text="An action (`api_key.revoked`), or every action of a kind (`api_key.`).",
    )
    object_type = serializers.CharField(
        required=False, max_length=100, help_text="`app_label.model`, e.g. `agents.agent`."
    )
    object_id = serializers.CharField(required=False, max_length=64)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        since, until = attrs.get("since"), attrs.get("until")
        if since is not None and until is not None and since >= until:
            # Schema-valid, but no range: a 422 (core.api.exceptions.RULE).
            raise serializers.ValidationError({"until": ["Must be after since."]}, code=RULE)
        return attrs


def _row(entry: AuditEntry) -> dict[str, Any]:
    return {
        "id": str(entry.id),
        "agency": str(entry.agency_id) if entry.agency_id else None,
        "seq": entry.seq,
        "at": jsonable(entry.at),
        "actor_type": entry.actor_type,
        "actor_user_id": entry.actor_user_id,
        "actor_api_key": entry.actor_api_key,
        "actor_display": entry.actor_display,
        "ip": entry.ip,
        "user_agent": entry.user_agent,
        "action": entry.action,
        "object_type": entry.object_type,
        "object_id": entry.object_id,
        "object_repr": entry.object_repr,
        "changes": entry.changes,
        "prev_hash": entry.prev_hash,
        "hash": entry.hash,
    }


def _cell(value: Any) -> Any:
    if isinstance(value, dict):
        value = json.dumps(value, ensure_ascii=False, sort_keys=True)
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value  # a spreadsheet would run it as a formula
    return "" if value is None else value


def _scope(principal: Principal) -> AbstractContextManager[Any]:
    if principal.agency_id is not None:
        return tenancy.agency_context(principal.agency_id)
    return tenancy.platform_context()  # a superuser without ?agency=: every chain


def _lines(principal: Principal, filters: Mapping[str, Any], fmt: str) -> Iterator[str]:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    if fmt == "csv":
        writer.writerow(COLUMNS)
        yield buffer.getvalue()
    with _scope(principal):
        for entry in iterate(audit_entries(**filters)):
            row = _row(entry)
            if fmt == "csv":
                buffer.seek(0)
                buffer.truncate()
                writer.writerow([_cell(row[name]) for name in COLUMNS])
                yield buffer.getvalue()
            else:
                yield json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n"


class AuditEntryExport(TenantScopedView):
    read_roles = ADMIN_ROLES
    renderer_classes = [JSONLinesRenderer, AuditCSVRenderer, JSONRenderer]

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any) -> Any:
        response = super().finalize_response(request, response, *args, **kwargs)
        if isinstance(response, Response):
            # Errors (and OPTIONS) keep the API's JSON shape whatever the client accepts.
            response.accepted_renderer = JSONRenderer()
            response.accepted_media_type = "application/json"
        return response

    @extend_schema(
        operation_id="audit_entries_export",
        summary="Export the audit log (JSON Lines, or CSV with Accept: text/csv)",
        description="Every entry matching the filters, oldest first, streamed: one JSON object "
        "per line (`application/x-ndjson`, the default), or CSV (`Accept: text/csv` or "
        "`?format=csv`; `changes` as JSON text). Agency admins only. Each entry has its "
        "`prev_hash` and `hash` (sha256 chain; `manage.py audit_verify` checks it).",
        parameters=[AuditExportQuery],
        responses={
            (200, "application/x-ndjson"): OpenApiResponse(OpenApiTypes.STR),
            (200, "text/csv"): OpenApiResponse(OpenApiTypes.STR),
        },
    )
    def get(self, request: Request) -> StreamingHttpResponse:
        params = request.query_params.dict()
        params.pop("format", None)
        query = AuditExportQuery(data=params)
        query.is_valid(raise_exception=True)
        filters = dict(query.validated_data)
        fmt = "csv" if request.accepted_renderer.format == "csv" else "jsonl"
        audit_record(
            action="audit.exported",
            agency_id=self.principal.agency_id,
            object_type="audit.auditentry",
            changes={"format": [None, fmt], "filters": [None, jsonable(filters)]},
        )
        response = StreamingHttpResponse(
            _lines(self.principal, filters, fmt),
            content_type="text/csv; charset=utf-8" if fmt == "csv" else "application/x-ndjson",
        )
        stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
        name = f"audit-{self.principal.agency_id or 'all'}-{stamp}.{fmt}"
        response["Content-Disposition"] = f'attachment; filename="{name}"'
        return response
