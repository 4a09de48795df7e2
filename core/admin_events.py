"""The automation events log in the admin, read-only: events are emitted by services and the API.

Each row says where it came from in words ("CRM", not ``crm``) and links what it is about to that
object's admin page where one exists (a run, a contact, ...). Core imports no feature app, so the
pages are named by URL, and an object type without one is shown unlinked.
"""

from __future__ import annotations

import json

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from core.admin_labels import LINK
from core.admin_scoping import AgencyScopedAdmin, ReadOnlyAdminMixin
from core.models import Event

# source_module as the emitters write it -> in words
MODULES = {
    "agents": "Agents",
    "ai_agents": "Agent tools",
    "flow": "Flow analysis",
    "approvals": "Approvals",
    "crm": "CRM",
    "calendar": "Calendar",
    "api": "REST API",
}
# source_entity_type (or "module.type" where a type is ambiguous) -> (in words, admin page)
ENTITIES = {
    "execution": ("Run", "admin:agents_execution_change"),
    "agent": ("Agent", "admin:agents_agent_change"),
    "approval": ("Approval", "admin:approvals_approval_change"),
    "question": ("Question", ""),
    "contact": ("Contact", "admin:crm_contact_change"),
    "note": ("Note", "admin:crm_note_change"),
    "task": ("Task", "admin:crm_task_change"),
    "calendar.event": ("Calendar event", "admin:crm_calendarevent_change"),
}


def module_label(module: str) -> str:
    return MODULES.get(module, module.replace("_", " ").capitalize())


def entity(event: Event) -> tuple[str, str]:
    """What ``event`` is about, in words, and its admin page's URL name ("" if none)."""
    kind = event.source_entity_type
    label, url_name = ENTITIES.get(
        f"{event.source_module}.{kind}",
        ENTITIES.get(kind, (kind.replace("_", " ").capitalize(), "")),
    )
    return label, url_name


class SourceModuleFilter(admin.SimpleListFilter):
    title = "source"
    parameter_name = "source_module"

    def lookups(
        self, request: HttpRequest, model_admin: admin.ModelAdmin[Event]
    ) -> list[tuple[str, str]]:
        modules = model_admin.get_queryset(request).values_list("source_module", flat=True)
        return [
            (m, module_label(m)) for m in sorted(set(modules.distinct()), key=module_label) if m
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Event]) -> QuerySet[Event]:
        value = self.value()
        return queryset.filter(source_module=value) if value else queryset


@admin.register(Event)
class EventAdmin(ReadOnlyAdminMixin, AgencyScopedAdmin):
    list_display = ["event_type", "source", "about", "actor_type", "created_at", "processed_at"]
    list_filter = ["actor_type", SourceModuleFilter, "source_entity_type"]
    date_hierarchy = "created_at"
    search_fields = ["event_type", "source_entity_id", "actor_id"]
    fields = [
        "event_type", "site", "payload_pretty", "source", "about", "source_module",
        "source_entity_type", "source_entity_id", "actor_type", "actor_user", "actor_id",
        "idempotency_key", "source_execution_id", "chain_depth", "created_at", "processed_at",
    ]  # fmt: skip

    @admin.display(description="Source", ordering="source_module")
    def source(self, obj: Event) -> str:
        return module_label(obj.source_module) if obj.source_module else "-"

    @admin.display(description="About")
    def about(self, obj: Event) -> SafeString | str:
        if not obj.source_entity_id:
            return "-"
        label, url_name = entity(obj)
        text = f"{label} {obj.source_entity_id[:8]}"
        try:
            url = reverse(url_name, args=[obj.source_entity_id]) if url_name else ""
        except NoReverseMatch:
            url = ""  # an id that is no primary key of that page
        return format_html(LINK, url, text) if url else text

    @admin.display(description="Payload")
    def payload_pretty(self, obj: Event | None) -> SafeString | str:
        if obj is None or not obj.payload:
            return "-"
        text = json.dumps(obj.payload, indent=2, ensure_ascii=False, sort_keys=True, default=str)
        return format_html('<pre style="white-space: pre-wrap; margin: 0">{}</pre>', text)
