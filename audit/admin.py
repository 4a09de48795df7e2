"""The audit log in the admin: read-only (nobody adds, edits or deletes an entry, superusers
included), searchable and filterable, for the agency's admins (superusers also see the
platform chain: their logins, failed logins of unknown names, agency deletions)."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin
from django.db.models import Model
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString

from audit.models import AuditEntry
from core.admin_scoping import ADMIN_ROLES, AgencyScopedAdmin, ReadOnlyAdminMixin, has_role


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnlyAdminMixin, AgencyScopedAdmin):
    list_display = ["at", "actor_display", "actor_type", "action", "object_type", "object_repr",
                    "ip"]  # fmt: skip
    list_filter = [
        "actor_type",
        ("action", admin.AllValuesFieldListFilter),
        ("object_type", admin.AllValuesFieldListFilter),
    ]
    date_hierarchy = "at"
    search_fields = ["action", "actor_display", "actor_api_key", "object_repr", "object_id", "ip"]
    readonly_fields = [
        "at", "action", "actor_type", "actor_display", "actor_user_id", "actor_api_key", "ip",
        "user_agent", "object_type", "object_id", "object_repr", "changes_pretty", "seq",
        "prev_hash", "hash",
    ]  # fmt: skip
    fields = list(readonly_fields)
    show_full_result_count = False  # a count(*) of a long log on every page is not needed

    def has_module_permission(self, request: HttpRequest) -> bool:
        return super().has_module_permission(request) and has_role(request, ADMIN_ROLES)

    def has_view_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return self.has_module_permission(request)

    def get_exclude(self, request: HttpRequest, obj: Model | None = None) -> Any:
        return []

    @admin.display(description="Changes")
    def changes_pretty(self, obj: AuditEntry | None) -> SafeString | str:
        if obj is None or not obj.changes:
            return "-"
        text = json.dumps(obj.changes, indent=2, ensure_ascii=False, sort_keys=True)
        return format_html('<pre style="white-space: pre-wrap; margin: 0">{}</pre>', text)
