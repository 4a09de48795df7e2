"""CRM tools: contacts, notes and tasks of the execution's agency."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q

from crm.models import Contact, ContactSource, ContactStatus, Note, NoteKind, Task, TaskPriority
from tools.builtin import _args
from tools.builtin._args import INVALID
from tools.handlers import ToolContext, ToolError
from tools.registry import handler

SEARCH_LIMIT = 50  # the seeded schema allows 100; 50 compact rows are plenty for a model
NOTE_MAX_CHARS = 20_000
RECENT_NOTES = 5
# What crm_update_contact may change. Ownership, source and agency links stay with staff.
UPDATABLE = (
    *("first_name", "last_name", "email", "phone", "company", "job_title", "status"),
    *("tags", "custom_fields"),
)
CREATE_TEXT_FIELDS = ("first_name", "last_name", "company", "phone")
EMAIL_CONSTRAINT = "crm_contact_unique_email"


def _max_length(field: str) -> int:
    return int(getattr(Contact._meta.get_field(field), "max_length", 0) or 0)


def _compact(contact: Contact) -> dict[str, Any]:
    return {
        "id": str(contact.id),
        "name": f"{contact.first_name} {contact.last_name}".strip(),
        "email": contact.email,
        "company": contact.company,
        "phone": contact.phone,
        "status": contact.status,
        "tags": contact.tags[:20],
    }


def _detail(contact: Contact) -> dict[str, Any]:
    notes = Note.objects.filter(agency_id=contact.agency_id, contact_id=contact.id).order_by(
        "-created_at"
    )[:RECENT_NOTES]
    return {
        **_compact(contact),
        "first_name": contact.first_name,
        "last_name": contact.last_name,
        "job_title": contact.job_title,
        "custom_fields": _args.jsonable(contact.custom_fields),
        "source": contact.source,
        "created_at": _args.iso(contact.created_at),
        "updated_at": _args.iso(contact.updated_at),
        "last_contacted_at": _args.iso(contact.last_contacted_at),
        "recent_notes": [
            {"kind": n.kind, "content": _args.truncate(n.content, 300)} for n in notes
        ],
    }


def _get_contact(ctx: ToolContext, contact_id: object, *, lock: bool = False) -> Contact:
    pk = _args.parse_uuid(contact_id, "contact_id")
    queryset = Contact.objects.filter(agency_id=ctx.agency_id, id=pk)
    found = (queryset.select_for_update() if lock else queryset).first()
    if found is None:
        raise ToolError("not_found", f"No contact with id {pk} in this agency.", contact_id=str(pk))
    return found


def _email(args: dict[str, Any], name: str = "email") -> str:
    address = _args.text(args, name, max_length=_max_length("email"))
    if address:
        _args.email_list([address], name, max_items=1)
    return address


# Compared as the unique constraint compares, lower() on both sides: ``iexact`` uses upper(),
# which differs for some characters (the Kelvin sign lower-cases to "k" but upper-cases to
# itself), so it could miss a row the insert then collides with. The literal ``email <> ''``
# lets PostgreSQL use the constraint's partial index even in a generic (prepared) plan. Written
# out once: the ORM compiled this query in ~0.5 ms, on every crm_get_contact by e-mail.
_DUPLICATE_SQL = (
    f"SELECT * FROM {Contact._meta.db_table}"  # noqa: S608 - a constant table name
    " WHERE agency_id = %s AND email <> '' AND lower(email) = lower(%s)"
    " AND id IS DISTINCT FROM %s::uuid LIMIT 1"
)


def _duplicate(ctx: ToolContext, email: str, *, exclude: Any = None) -> Contact | None:
    """The agency's contact whose e-mail the unique constraint counts as ``email`` (other than
    ``exclude``)."""
    found = list(Contact.objects.raw(_DUPLICATE_SQL, [ctx.agency_id, email, exclude]))
    return found[0] if found else None


def _duplicate_error(existing: Contact) -> ToolError:
    return ToolError(
        "duplicate",
        f"A contact with the e-mail {existing.email} already exists (id {existing.id}).",
        existing_id=str(existing.id),
    )


def _is_email_conflict(exc: IntegrityError) -> bool:
    """Whether ``exc`` is the one-contact-per-e-mail constraint (not another integrity error)."""
    diag = getattr(exc.__cause__, "diag", None)
    return getattr(diag, "constraint_name", None) == EMAIL_CONSTRAINT


def _emit(ctx: ToolContext, event_type: str, entity: str, entity_id: Any, **payload: Any) -> None:
    _args.emit(ctx, event_type, payload, module="crm", entity=entity, entity_id=entity_id)


@handler("crm_get_contact")
def crm_get_contact(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    if args.get("contact_id"):
        return {"contact": _detail(_get_contact(ctx, args["contact_id"]))}
    email = _email(args)
    if not email:
        raise ToolError(INVALID, "Give either 'contact_id' or 'email'.")
    found = _duplicate(ctx, email)
    if found is None:
        raise ToolError("not_found", f"No contact with the e-mail {email} in this agency.")
    return {"contact": _detail(found)}


@handler("crm_search_contacts")
def crm_search_contacts(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    query = _args.text(args, "query", max_length=200)
    limit = _args.bounded_int(args, "limit", default=10, high=SEARCH_LIMIT)
    contacts = Contact.objects.filter(agency_id=ctx.agency_id)
    for term in query.split()[:5]:  # every word must match one of the searched fields
        contacts = contacts.filter(
            Q(first_name__icontains=term)
            | Q(last_name__icontains=term)
            | Q(email__icontains=term)
            | Q(company__icontains=term)
            | Q(phone__icontains=term)
        )
    if args.get("status") is not None:
        contacts = contacts.filter(
            status=_args.choice(args["status"], "status", ContactStatus.values)
        )
    if args.get("tags"):
        tags = _args.string_list(args["tags"], "tags", max_items=20, max_length=100)
        contacts = contacts.filter(tags__contains=tags)
    rows = list(contacts.order_by("last_name", "first_name", "email", "id")[: limit + 1])
    return {
        "contacts": [_compact(c) for c in rows[:limit]],
        "count": min(len(rows), limit),
        "has_more": len(rows) > limit,
    }


@handler("crm_create_contact")
def crm_create_contact(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    email = _email(args)
    if not email:
        raise ToolError(INVALID, "'email' is required to create a contact.")
    values = {f: _args.text(args, f, max_length=_max_length(f)) for f in CREATE_TEXT_FIELDS}
    tags = _args.string_list(args.get("tags") or [], "tags", max_items=50, max_length=100)
    custom_fields = args.get("custom_fields") or {}
    if not isinstance(custom_fields, dict):
        raise ToolError(INVALID, "'custom_fields' must be an object.")
    existing = _duplicate(ctx, email)
    if existing is not None:
        raise _duplicate_error(existing)
    try:
        with transaction.atomic():  # a concurrent insert of the same e-mail loses here, cleanly
            contact = Contact.objects.create(
                agency_id=ctx.agency_id,
                site_id=ctx.site_id,
                email=email,
                tags=tags,
                custom_fields=custom_fields,
                source=ContactSource.AI_AGENT,
                source_details={
                    "agent_id": str(ctx.agent_id),
                    "execution_id": str(ctx.execution_id),
                },
                agent_id=ctx.agent_id,
                **values,
            )
    except IntegrityError as exc:
        if not _is_email_conflict(exc):
            raise
        existing = _duplicate(ctx, email)
        if existing is None:  # the colliding row went again since: still this e-mail's conflict
            raise ToolError("duplicate", f"A contact with the e-mail {email} exists.") from None
        raise _duplicate_error(existing) from None
    _emit(ctx, "crm.contact.created", "contact", contact.id, contact_id=str(contact.id))
    return {"contact": _compact(contact), "created": True}


def _new_value(ctx: ToolContext, contact: Contact, field: str, updates: dict[str, Any]) -> Any:
    if field == "tags":
        return _args.string_list(updates["tags"], "tags", max_items=50, max_length=100)
    if field == "custom_fields":
        extra = updates["custom_fields"]
        if not isinstance(extra, dict):
            raise ToolError(INVALID, "'custom_fields' must be an object (null removes a key).")
        # Merged, not replaced: the model sees a few keys and must not wipe the others.
        merged = {**contact.custom_fields, **extra}
        return {key: value for key, value in merged.items() if value is not None}
    if field == "status":
        return _args.choice(updates.get("status"), "status", ContactStatus.values)
    if field != "email":
        return _args.text(updates, field, max_length=_max_length(field))
    email = _email(updates)
    other = _duplicate(ctx, email, exclude=contact.id) if email else None
    if other is not None:
        raise _duplicate_error(other)
    return email


def _apply_updates(ctx: ToolContext, contact: Contact, updates: dict[str, Any]) -> list[str]:
    unknown = sorted(set(updates) - set(UPDATABLE))
    if unknown:
        raise ToolError(
            INVALID,
            f"These fields cannot be updated: {', '.join(unknown)}. "
            f"Updatable fields: {', '.join(UPDATABLE)}.",
        )
    changed: list[str] = []
    for field in UPDATABLE:
        if field in updates:
            value = _new_value(ctx, contact, field, updates)
            if getattr(contact, field) != value:
                setattr(contact, field, value)
                changed.append(field)
    return changed


@handler("crm_update_contact")
def crm_update_contact(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    updates = args.get("updates")
    if not isinstance(updates, dict) or not updates:
        raise ToolError(INVALID, "'updates' must be a non-empty object of fields to change.")
    contact = _get_contact(ctx, args.get("contact_id"), lock=True)
    changed = _apply_updates(ctx, contact, updates)
    if changed:
        try:
            with transaction.atomic():
                contact.save(update_fields=[*changed, "updated_at"])
        except IntegrityError as exc:  # another writer took the e-mail since the check
            if not _is_email_conflict(exc):
                raise
            raise ToolError(
                "duplicate", f"A contact with the e-mail {contact.email} exists."
            ) from None
        payload = {"contact_id": str(contact.id), "changed_fields": changed}
        _emit(ctx, "crm.contact.updated", "contact", contact.id, **payload)
    return {"contact": _compact(contact), "changed_fields": changed}


@handler("crm_add_note")
def crm_add_note(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    content = _args.text(args, "content", max_length=NOTE_MAX_CHARS, required=True)
    kind = _args.choice(args.get("type") or NoteKind.NOTE, "type", NoteKind.values)
    contact = _get_contact(ctx, args.get("contact_id"))
    note = Note.objects.create(
        agency_id=ctx.agency_id,
        contact_id=contact.id,
        kind=kind,
        content=content,
        agent_id=ctx.agent_id,
    )
    payload = {"note_id": str(note.id), "contact_id": str(contact.id), "kind": kind}
    _emit(ctx, "crm.note.created", "note", note.id, **payload)
    return {
        "note": {
            "id": str(note.id),
            "contact_id": str(contact.id),
            "kind": kind,
            "content": _args.truncate(content),
            "created_at": _args.iso(note.created_at),
        }
    }


@handler("task_create")
def task_create(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    title = _args.text(args, "title", max_length=300, required=True)
    description = _args.text(args, "description", max_length=NOTE_MAX_CHARS)
    priority = _args.choice(args.get("priority") or "medium", "priority", TaskPriority.values)
    due = args.get("due_date")
    due_at = _args.parse_datetime(due, "due_date", date_only_ok=True) if due else None
    assignee_id = None
    if args.get("assigned_to"):
        assignee_id, _ = _args.member_user(ctx, args["assigned_to"], "assigned_to")
    task = Task.objects.create(
        agency_id=ctx.agency_id,
        site_id=ctx.site_id,
        title=title,
        description=description,
        due_at=due_at,
        priority=priority,
        assignee_id=assignee_id,
        agent_id=ctx.agent_id,
    )
    _emit(ctx, "crm.task.created", "task", task.id, task_id=str(task.id), title=title)
    return {
        "task": {
            "id": str(task.id),
            "title": title,
            "priority": priority,
            "status": task.status,
            "due_at": _args.iso(due_at),
            "assignee_id": assignee_id,
        }
    }
