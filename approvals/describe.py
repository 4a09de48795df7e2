"""A tool call in words a person can judge: "Send email 'Q3 offer' to 14 recipients".

Used by the approvers' inbox (each card leads with it) and by the approval e-mails, so it returns
plain text: callers escape it like any agent-controlled text (the arguments come from the model).
The platform's default tools that approvals catch or that change data get a sentence of their
own; any other tool gets "Run <Display name> with a=…, b=…". Long values are cut.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["describe_action", "humanize_tool_name"]

TEXT_CHARS = 60  # a subject, a title, a message: enough to recognise it
VALUE_CHARS = 40  # one argument's value in the generic sentence
MAX_CHARS = 240  # the whole sentence
GENERIC_ARGUMENTS = 3  # arguments named in the generic sentence


def clip(value: object, limit: int = TEXT_CHARS) -> str:
    """``value`` as one line of at most ``limit`` characters (whitespace folded, "…" if cut)."""
    text = " ".join(str(value).split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _quoted(value: object, limit: int = TEXT_CHARS) -> str:
    return f"'{clip(value, limit)}'"


def _text(arguments: Mapping[str, Any], name: str) -> str:
    """A string argument, or "" when it is missing, empty or not a string."""
    value = arguments.get(name)
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        return str(value).strip()
    return ""


def _list(arguments: Mapping[str, Any], name: str) -> list[str]:
    """A list of strings (a single string counts as a list of one; commas split it)."""
    value = arguments.get(name)
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, list | tuple):
        return [str(item).strip() for item in value if str(item).strip()]
    return []


def _people(addresses: list[str], noun: str = "recipient") -> str:
    if len(addresses) == 1:
        return clip(addresses[0], TEXT_CHARS)
    if len(addresses) == 2:
        return f"{clip(addresses[0], 40)} and {clip(addresses[1], 40)}"
    return f"{len(addresses)} {noun}s"


def _short_id(value: str) -> str:
    """A UUID-like id cut to its first block; anything else clipped."""
    if len(value) == 36 and value.count("-") == 4:
        return value[:8]
    return clip(value, 40)


def _scalar(value: Any, limit: int = VALUE_CHARS) -> str:  # noqa: PLR0911 - one per type
    """One argument's value, short: strings quoted, lists and objects counted."""
    if isinstance(value, str):
        return _quoted(value, limit)
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int | float):
        return clip(value, limit)
    if isinstance(value, list | tuple):
        if len(value) == 1 and not isinstance(value[0], dict | list):
            return f"[{_scalar(value[0], limit)}]"
        return f"[{len(value)} items]"
    if isinstance(value, dict):
        return f"{{{len(value)} fields}}" if value else "{}"
    return clip(value, limit)


def _assignments(values: Mapping[str, Any], limit: int = GENERIC_ARGUMENTS) -> str:
    """``a='x', b=3`` for the first ``limit`` non-empty values, "and N more" after them."""
    shown = [(key, value) for key, value in values.items() if value not in (None, "", [], {})]
    parts = [f"{clip(key, 30)}={_scalar(value)}" for key, value in shown[:limit]]
    if len(shown) > limit:
        parts.append(f"and {len(shown) - limit} more")
    return ", ".join(parts)


# --- the default tools -------------------------------------------------------------------------


def _email(verb: str) -> Callable[[Mapping[str, Any]], str]:
    def describe(arguments: Mapping[str, Any]) -> str:
        subject = _text(arguments, "subject")
        recipients = _list(arguments, "to")
        sentence = f"{verb} email {_quoted(subject)}" if subject else f"{verb} an email"
        if recipients:
            sentence += f" to {_people(recipients)}"
        return sentence

    return describe


def _contact_ref(arguments: Mapping[str, Any]) -> str:
    contact = _text(arguments, "contact_id")
    if contact:
        return f"contact {_short_id(contact)}"
    email = _text(arguments, "email")
    return f"contact {clip(email, 60)}" if email else "a contact"


def _crm_create_contact(arguments: Mapping[str, Any]) -> str:
    email = _text(arguments, "email")
    name = " ".join(filter(None, (_text(arguments, "first_name"), _text(arguments, "last_name"))))
    company = _text(arguments, "company")
    sentence = f"Create contact {clip(email, 60)}" if email else "Create a contact"
    details = ", ".join(clip(part, 40) for part in (name, company) if part)
    return f"{sentence} ({details})" if details else sentence


def _crm_update_contact(arguments: Mapping[str, Any]) -> str:
    sentence = f"Update {_contact_ref(arguments)}"
    updates = arguments.get("updates")
    if isinstance(updates, Mapping) and updates:
        changes = [f"{clip(key, 30)} to {_scalar(value)}" for key, value in updates.items()]
        more = f" and {len(changes) - 3} more" if len(changes) > 3 else ""
        sentence += ": set " + ", ".join(changes[:3]) + more
    return sentence


def _crm_add_note(arguments: Mapping[str, Any]) -> str:
    kind = _text(arguments, "type")
    noun = "a note" if kind in ("", "note") else f"a {clip(kind, 20)} note"
    sentence = f"Add {noun} to {_contact_ref(arguments)}"
    content = _text(arguments, "content")
    return f"{sentence}: {_quoted(content)}" if content else sentence


def _crm_delete(tool_name: str, arguments: Mapping[str, Any]) -> str:
    entity = tool_name.removeprefix("crm_delete_").replace("_", " ") or "record"
    ids = [
        _short_id(str(value))
        for key, value in arguments.items()
        if key.endswith("id") and isinstance(value, str | int) and str(value)
    ]
    many = _list(arguments, f"{entity.replace(' ', '_')}_ids") or _list(arguments, "ids")
    if many:
        return f"Delete {len(many)} CRM {entity}s" if len(many) > 1 else f"Delete CRM {entity}"
    return f"Delete CRM {entity} {ids[0]}" if ids else f"Delete CRM {entity}"


def _task_create(arguments: Mapping[str, Any]) -> str:
    title = _text(arguments, "title")
    sentence = f"Create task {_quoted(title)}" if title else "Create a task"
    details = []
    if priority := _text(arguments, "priority"):
        details.append(f"{clip(priority, 20)} priority")
    if due := _text(arguments, "due_date"):
        details.append(f"due {clip(due, 25)}")
    if assignee := _text(arguments, "assigned_to"):
        details.append(f"for {_short_id(assignee)}")
    return f"{sentence} ({', '.join(details)})" if details else sentence


def _calendar_create_event(arguments: Mapping[str, Any]) -> str:
    title = _text(arguments, "title")
    sentence = f"Schedule {_quoted(title)}" if title else "Schedule an event"
    if start := _text(arguments, "start_time"):
        sentence += f" at {clip(start, 25)}"
    attendees = _list(arguments, "attendees")
    if attendees:
        sentence += f" with {_people(attendees, 'attendee')}"
    return sentence


def _notify_user(arguments: Mapping[str, Any]) -> str:
    user = _text(arguments, "user_id")
    whom = f"user {_short_id(user)}" if user else "the agency's team"
    channel = _text(arguments, "channel")
    by = f" by {channel.replace('_', '-')}" if channel and channel != "in_app" else ""
    message = _text(arguments, "message")
    return f"Notify {whom}{by}: {_quoted(message)}" if message else f"Notify {whom}{by}"


def _trigger_workflow(arguments: Mapping[str, Any]) -> str:
    workflow = _text(arguments, "workflow_id")
    sentence = f"Start workflow {_quoted(workflow, 50)}" if workflow else "Start a workflow"
    data = arguments.get("input_data")
    if isinstance(data, Mapping) and data:
        sentence += f" with {_assignments(data)}"
    return sentence


def _data_query(verb: str) -> Callable[[Mapping[str, Any]], str]:
    def describe(arguments: Mapping[str, Any]) -> str:
        entity = _text(arguments, "entity_type") or "data"
        sentence = f"{verb} {clip(entity, 40)}"
        filters = arguments.get("filters")
        if isinstance(filters, Mapping) and filters:
            sentence += f" where {_assignments(filters)}"
        return sentence

    return describe


def _web_search(arguments: Mapping[str, Any]) -> str:
    query = _text(arguments, "query")
    return f"Search the web for {_quoted(query)}" if query else "Search the web"


def _web_scrape(arguments: Mapping[str, Any]) -> str:
    url = _text(arguments, "url")
    return f"Read the web page {clip(url, 80)}" if url else "Read a web page"


def _wait(arguments: Mapping[str, Any]) -> str:
    seconds = arguments.get("seconds")
    if isinstance(seconds, int) and not isinstance(seconds, bool):
        return f"Wait {seconds} second{'s' if seconds != 1 else ''}"
    return "Wait"


def _ask_user(arguments: Mapping[str, Any]) -> str:
    question = _text(arguments, "question")
    return f"Ask a person: {_quoted(question, 80)}" if question else "Ask a person"


DESCRIBERS: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "email_send": _email("Send"),
    "email_draft": _email("Draft"),
    "crm_create_contact": _crm_create_contact,
    "crm_update_contact": _crm_update_contact,
    "crm_add_note": _crm_add_note,
    "task_create": _task_create,
    "calendar_create_event": _calendar_create_event,
    "notify_user": _notify_user,
    "trigger_workflow": _trigger_workflow,
    "data_query": _data_query("Query"),
    "data_export": _data_query("Export"),
    "web_search": _web_search,
    "web_scrape": _web_scrape,
    "wait": _wait,
    "ask_user": _ask_user,
}


def humanize_tool_name(tool_name: str) -> str:
    """``custom_lookup_v2`` -> ``Custom lookup v2`` (for tools without a display name)."""
    words = tool_name.replace("_", " ").replace("-", " ").split()
    return " ".join(words).capitalize() if words else "a tool"


def describe_action(
    tool_name: str, arguments: Mapping[str, Any] | None, *, display_name: str = ""
) -> str:
    """The call in words: "Send email 'Q3 offer' to 14 recipients". ``display_name`` (the
    tool's, if known) names tools that have no sentence of their own. Never raises: arguments
    of an unexpected shape give a shorter sentence, not an error."""
    args: Mapping[str, Any] = arguments if isinstance(arguments, Mapping) else {}
    describe = DESCRIBERS.get(tool_name)
    try:
        if describe is not None:
            sentence = describe(args)
        elif tool_name.startswith("crm_delete_"):
            sentence = _crm_delete(tool_name, args)
        else:
            sentence = _generic(tool_name, args, display_name)
    except (TypeError, ValueError, AttributeError):
        sentence = _generic(tool_name, {}, display_name)
    return clip(sentence, MAX_CHARS)


def _generic(tool_name: str, arguments: Mapping[str, Any], display_name: str) -> str:
    name = clip(display_name, 60) if display_name.strip() else humanize_tool_name(tool_name)
    listed = _assignments(arguments)
    return f"Run {name} with {listed}" if listed else f"Run {name}"
