"""What the inbox's pages share: who may decide, how a page is rendered in the admin's frame,
which agency a superuser's fragments name, and a call's arguments as rows a person reads."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django.template.response import TemplateResponse

from approvals.inbox.schema_form import argument_label, field_order
from core.admin_scoping import has_role, request_membership
from core.api.permissions import APPROVE_ROLES
from core.models import Agency

DECIDE_ROLES = APPROVE_ROLES  # admins and approvers, as over the API


# --- who and where -------------------------------------------------------------------------------


def can_decide(request: HttpRequest) -> bool:
    return has_role(request, DECIDE_ROLES)


def require_decider(request: HttpRequest) -> None:
    if not can_decide(request):
        raise PermissionDenied("Only the agency's admins and approvers decide.")


def render_page(
    request: HttpRequest, template: str, context: dict[str, Any], status: int = 200
) -> Any:
    base = admin.site.each_context(request)
    return TemplateResponse(request, template, {**base, **context}, status=status)


def agency_query(request: HttpRequest, agency: Agency) -> str:
    # A superuser's fragments and socket name the agency: another tab may have picked another.
    return "" if request_membership(request) is not None else f"agency={agency.pk}"


# --- what a page shows ---------------------------------------------------------------------------


def argument_rows(arguments: Any, schema: Any = None) -> list[dict[str, Any]]:
    """The call's arguments as label / value rows a person reads (the schema's title or the
    name in words; lists one item per line, objects as indented JSON), the tool's required ones
    first."""
    if not isinstance(arguments, dict):
        return []
    rows = []
    for name, value in sorted(arguments.items(), key=field_order(schema)):
        if isinstance(value, str):
            text, block = value, "\n" in value or len(value) > 120
        elif isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
            text, block = "\n".join(str(v) for v in value), len(value) > 1
        elif isinstance(value, dict | list):
            text, block = json.dumps(value, indent=2, ensure_ascii=False), True
        else:
            text, block = json.dumps(value), False
        count = len(value) if isinstance(value, list) else None
        label = argument_label(name, schema)
        rows.append({"name": label, "text": text, "block": block, "count": count})
    return rows
