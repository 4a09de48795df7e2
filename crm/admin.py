"""The CRM data agents act on, edited by agency staff like any CRM."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from core.admin_empty import EmptyState
from core.admin_scoping import (
    AgencyScopedAdmin,
    ScopedInlineMixin,
    TabularInline,
    request_agency,
)
from core.models import User
from crm.models import CalendarEvent, Contact, EmailMessage, FormSubmission, Note, Task

USER_FIELDS = frozenset({"owner", "author", "assignee", "organizer"})


class CrmAdmin(AgencyScopedAdmin):
    readonly_fields = ["agent", "created_at", "updated_at"]

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        # Logins are platform-wide: offer only the agency's own members.
        agency = request_agency(request)
        if db_field.name in USER_FIELDS and agency is not None:
            kwargs["queryset"] = User.objects.filter(membership__agency=agency)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


class NoteInline(ScopedInlineMixin, TabularInline):
    model = Note
    extra = 0
    fields = ["kind", "content", "author", "agent", "created_at"]
    readonly_fields = ["author", "agent", "created_at"]


@admin.register(Contact)
class ContactAdmin(CrmAdmin):
    list_display = [
        "__str__", "email", "company", "status", "source", "owner", "last_contacted_at",
    ]  # fmt: skip
    list_filter = ["status", "source", "site"]
    search_fields = ["first_name", "last_name", "email", "company", "phone"]
    inlines = [NoteInline]

    def save_formset(self, request: HttpRequest, form: Any, formset: Any, change: bool) -> None:
        notes = formset.save(commit=False)
        for note in formset.deleted_objects:
            note.delete()
        for note in notes:
            note.agency_id = form.instance.agency_id
            if note.author_id is None and note.agent_id is None:
                note.author = request.user
            note.save()
        formset.save_m2m()


@admin.register(Note)
class NoteAdmin(CrmAdmin):
    list_display = ["__str__", "contact", "kind", "author", "agent", "created_at"]
    list_filter = ["kind"]
    list_select_related = ["contact"]
    search_fields = ["content"]
    date_hierarchy = "created_at"


@admin.register(Task)
class TaskAdmin(CrmAdmin):
    list_display = ["title", "status", "priority", "due_at", "assignee", "contact", "agent"]
    list_filter = ["status", "priority"]
    list_select_related = ["contact"]
    search_fields = ["title", "description"]
    date_hierarchy = "due_at"


@admin.register(CalendarEvent)
class CalendarEventAdmin(CrmAdmin):
    empty_state = EmptyState(
        "No calendar event yet",
        "Meetings and calls with contacts: an agent with the calendar tools books them (and "
        "finds free times against them), or add one here.",
    )
    list_display = ["title", "start_at", "end_at", "status", "organizer", "contact", "location"]
    list_filter = ["status"]
    list_select_related = ["contact"]
    search_fields = ["title", "description", "location"]
    date_hierarchy = "start_at"


@admin.register(EmailMessage)
class EmailMessageAdmin(CrmAdmin):
    list_display = ["subject", "status", "to", "contact", "agent", "sent_at", "created_at"]
    list_filter = ["status"]
    list_select_related = ["contact"]
    search_fields = ["subject", "body"]
    date_hierarchy = "created_at"
    readonly_fields = [*CrmAdmin.readonly_fields, "execution", "provider_message_id"]


@admin.register(FormSubmission)
class FormSubmissionAdmin(CrmAdmin):
    empty_state = EmptyState(
        "No form submission yet",
        "What visitors sent through a site's forms, each with its fields and the contact it "
        "came from; agents read them with their data tools. Add one here.",
    )
    list_display = ["form_name", "contact", "page_url", "submitted_at"]
    list_filter = ["form_name"]
    search_fields = ["form_name", "page_url"]
    date_hierarchy = "submitted_at"
    readonly_fields = ["submitted_at", "created_at", "updated_at"]
