"""The platform's ``remember`` and ``recall`` tools (issue 17; seed 004 MemoryManager ``store``
and ``retrieveRelevant``): an agent stores and searches its long-term memories on purpose
(tools/builtin/memory.py)."""

from django.db import migrations

from core.tenancy import platform_context

MEMORY_TYPES = ["fact", "preference", "pattern", "relationship", "outcome"]
SUBJECT = {
    "subject_type": {
        "type": "string",
        "maxLength": 50,
        "description": "What the memory is about: contact, company, deal, ... (optional).",
    },
    "subject_id": {
        "type": "string",
        "description": "The id (UUID) of that contact, company or deal (optional).",
    },
}

TOOLS = {
    "remember": {
        "display_name": "Remember",
        "description": (
            "Store something worth knowing in future runs as a long-term memory: a fact, a "
            "preference, a pattern that worked, a relationship or an outcome. Write one clear, "
            "self-contained statement (names, not pronouns). If you already remember it, that "
            "memory is reinforced instead of stored twice."
        ),
        "category": "system",
        "parameters_schema": {
            "type": "object",
            "properties": {
                "content": {
                    "type": "string",
                    "maxLength": 2000,
                    "description": "The statement to remember.",
                },
                "memory_type": {"type": "string", "enum": MEMORY_TYPES},
                **SUBJECT,
                "importance": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 10,
                    "description": "How important to remember, 1-10 (default 5).",
                },
                "confidence": {
                    "type": "number",
                    "minimum": 0,
                    "maximum": 1,
                    "description": "How sure you are, 0-1 (default 0.8).",
                },
                "tags": {
                    "type": "array",
                    "items": {"type": "string", "maxLength": 100},
                    "maxItems": 20,
                },
                "expires_in_days": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 3650,
                    "description": "Forget it after this many days (optional).",
                },
            },
            "required": ["content", "memory_type"],
        },
        "handler_type": "internal",
        "handler_config": {"handler": "remember"},
        "requires_modules": [],
        "requires_permissions": [],
        "is_dangerous": False,
        "is_active": True,
    },
    "recall": {
        "display_name": "Recall",
        "description": (
            "Search your long-term memories by meaning and words: the most relevant first, "
            "with how similar each is to the query. Use it before acting on a contact, a "
            "company or a situation you may have met before."
        ),
        "category": "system",
        "parameters_schema": {
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "maxLength": 1000,
                    "description": "What you want to remember, in your own words.",
                },
                "k": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 20,
                    "description": "How many memories to return (default 5).",
                },
                "memory_types": {
                    "type": "array",
                    "items": {"type": "string", "enum": MEMORY_TYPES},
                    "description": "Only these types (optional).",
                },
                **SUBJECT,
            },
            "required": ["query"],
        },
        "handler_type": "internal",
        "handler_config": {"handler": "recall"},
        "requires_modules": [],
        "requires_permissions": [],
        "is_dangerous": False,
        "is_active": True,
    },
}


def add_tools(apps, schema_editor):  # type: ignore[no-untyped-def]
    Tool = apps.get_model("tools", "Tool")
    alias = schema_editor.connection.alias
    with platform_context(using=alias):
        for name, fields in TOOLS.items():
            Tool.objects.using(alias).update_or_create(
                name=name, agency=None, is_system=True, defaults=fields
            )


def remove_tools(apps, schema_editor):  # type: ignore[no-untyped-def]
    Tool = apps.get_model("tools", "Tool")
    alias = schema_editor.connection.alias
    with platform_context(using=alias):
        Tool.objects.using(alias).filter(name__in=list(TOOLS), agency=None, is_system=True).delete()


class Migration(migrations.Migration):
    dependencies = [("tools", "0009_email_recipients_format")]

    operations = [migrations.RunPython(add_tools, remove_tools)]
