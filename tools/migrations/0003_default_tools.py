"""The 17 default tools of seed 004 as system tools (agency NULL, readable by every agency).

Names, display names, categories, parameter schemas and handler type/config are the seed's
``INSERT INTO ai_agent_tools``; where its "Built-in Tool Examples" define a tool more fully
(crm_get_contact, crm_search_contacts, crm_create_contact) that richer definition wins, and
``requires_modules`` follows the module a handler calls. The seed's INSERT sets no
``is_dangerous`` (so false) and its example marks crm_create_contact ``isDangerous: false``:
risky calls are caught by the risk rules (approvals 0003), as in the seed's ``assessRisk``.

A frozen copy: later changes to these tools need a new migration.
"""

from django.db import migrations

from core.tenancy import platform_context

STRING = {"type": "string"}
STRINGS = {"type": "array", "items": {"type": "string"}}
DATE_TIME = {"type": "string", "format": "date-time"}

DEFAULT_TOOLS = [
    # --- CRM ---------------------------------------------------------------------------------
    {
        "name": "crm_get_contact",
        "display_name": "Get Contact",
        "description": "Retrieve a contact by ID or email address",
        "category": "crm",
        "parameters_schema": {
            "type": "object",
            "properties": {
                "contact_id": {"type": "string", "description": "Contact UUID"},
                "email": {"type": "string", "format": "email", "description": "Contact email"},
            },
            "oneOf": [{"required": ["contact_id"]}, {"required": ["email"]}],
        },
        "handler_type": "module",
        "handler_config": {"module": "crm", "action": "getContact"},
        "requires_modules": ["crm"],
    },
    {
        "name": "crm_search_contacts",
        "display_name": "Search Contacts",
        "description": "Search contacts by name, email, company, or tags",
        "category": "crm",
        "parameters_schema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Search query"},
                "tags": {**STRINGS, "description": "Filter by tags"},
                "status": {
                    "type": "string",
                    "enum": ["active", "inactive", "lead", "customer"],
                    "description": "Filter by status",
                },
                "limit": {"type": "integer", "default": 10, "maximum": 100},
            },
            "required": ["query"],
        },
        "handler_type": "module",
        "handler_config": {"module": "crm", "action": "searchContacts"},
        "requires_modules": ["crm"],
    },
    {
        "name": "crm_create_contact",
        "display_name": "Create Contact",
        "description": "Create a new contact in the CRM",
        "category": "crm",
        "parameters_schema": {
            "type": "object",
            "properties": {
                "email": {"type": "string", "format": "email"},
                "first_name": STRING,
                "last_name": STRING,
                "company": STRING,
                "phone": STRING,
                "tags": STRINGS,
                "custom_fields": {"type": "object"},
            },
            "required": ["email"],
        },
        "handler_type": "module",
        "handler_config": {"module": "crm", "action": "createContact"},
        "requires_modules": ["crm"],
    },
    {
        "name": "crm_update_contact",
        "display_name": "Update Contact",
        "description": "Update an existing contact",
        "category": "crm",
        "parameters_schema": {
            "type": "object",
            "properties": {"contact_id": STRING, "updates": {"type": "object"}},
            "required": ["contact_id", "updates"],
        },
        "handler_type": "module",
        "handler_config": {"module": "crm", "action": "updateContact"},
        "requires_modules": ["crm"],
    },
    {
        "name": "crm_add_note",
        "display_name": "Add Contact Note",
        "description": "Add a note to a contact",
        "category": "crm",
        "parameters_schema": {
            "type": "object",
            "properties": {
                "contact_id": STRING,
                "content": STRING,
                "type": {"type": "string", "enum": ["note", "call", "meeting", "email"]},
            },
            "required": ["contact_id", "content"],
        },
        "handler_type": "module",
        "handler_config": {"module": "crm", "action": "addNote"},
        "requires_modules": ["crm"],
    },
    # --- Communication -----------------------------------------------------------------------
    {
        "name": "email_send",
        "display_name": "Send Email",
        "description": "Send an email to one or more recipients",
        "category": "communication",
        "parameters_schema": {
            "type": "object",
            "properties": {
                "to": STRINGS,
                "subject": STRING,
                "body": STRING,
                "template_id": STRING,
            },
            "required": ["to", "subject", "body"],
        },
        "handler_type": "module",
        "handler_config": {"module": "email", "action": "send"},
        "requires_modules": ["email"],
    },
    {
        "name": "email_draft",
        "display_name": "Draft Email",
        "description": "Create an email draft for review",
        "category": "communication",
        "parameters_schema": {
            "type": "object",
            "properties": {"to": STRINGS, "subject": STRING, "body": STRING},
            "required": ["to", "subject", "body"],
        },
        "handler_type": "internal",
        "handler_config": {"handler": "createEmailDraft"},
    },
    # --- Calendar ----------------------------------------------------------------------------
    {
        "name": "calendar_create_event",
        "display_name": "Create Calendar Event",
        "description": "Schedule a new calendar event",
        "category": "calendar",
        "parameters_schema": {
            "type": "object",
            "properties": {
                "title": STRING,
                "start_time": DATE_TIME,
                "end_time": DATE_TIME,
                "attendees": STRINGS,
                "description": STRING,
            },
            "required": ["title", "start_time", "end_time"],
        },
        "handler_type": "module",
        "handler_config": {"module": "booking", "action": "createEvent"},
        "requires_modules": ["booking"],
    },
    {
        "name": "calendar_check_availability",
        "display_name": "Check Availability",
        "description": "Check calendar availability for a time range",
        "category": "calendar",
        "parameters_schema": {
            "type": "object",
            "properties": {"start_time": DATE_TIME, "end_time": DATE_TIME, "user_id": STRING},
            "required": ["start_time", "end_time"],
        },
        "handler_type": "module",
        "handler_config": {"module": "booking", "action": "checkAvailability"},
        "requires_modules": ["booking"],
    },
    # --- Tasks -------------------------------------------------------------------------------
    {
        "name": "task_create",
        "display_name": "Create Task",
        "description": "Create a new task",
        "category": "task",
        "parameters_schema": {
            "type": "object",
            "properties": {
                "title": STRING,
                "description": STRING,
                "due_date": DATE_TIME,
                "priority": {"type": "string", "enum": ["low", "medium", "high"]},
                "assigned_to": STRING,
            },
            "required": ["title"],
        },
        "handler_type": "internal",
        "handler_config": {"handler": "createTask"},
    },
    # --- Data --------------------------------------------------------------------------------
    {
        "name": "data_query",
        "display_name": "Query Data",
        "description": "Run a structured query against platform data",
        "category": "data",
        "parameters_schema": {
            "type": "object",
            "properties": {
                "entity_type": STRING,
                "filters": {"type": "object"},
                "limit": {"type": "integer", "default": 100},
                "order_by": STRING,
            },
            "required": ["entity_type"],
        },
        "handler_type": "internal",
        "handler_config": {"handler": "queryData"},
    },
    {
        "name": "data_aggregate",
        "display_name": "Aggregate Data",
        "description": "Get aggregated statistics",
        "category": "data",
        "parameters_schema": {
            "type": "object",
            "properties": {
                "entity_type": STRING,
                "metric": STRING,
                "group_by": STRING,
                "date_range": {"type": "object"},
            },
            "required": ["entity_type", "metric"],
        },
        "handler_type": "internal",
        "handler_config": {"handler": "aggregateData"},
    },
    # --- Web ---------------------------------------------------------------------------------
    {
        "name": "web_search",
        "display_name": "Web Search",
        "description": "Search the web for information",
        "category": "web",
        "parameters_schema": {
            "type": "object",
            "properties": {"query": STRING, "num_results": {"type": "integer", "default": 5}},
            "required": ["query"],
        },
        "handler_type": "external",
        "handler_config": {"provider": "serper", "action": "search"},
    },
    {
        "name": "web_scrape",
        "display_name": "Scrape Webpage",
        "description": "Extract content from a webpage",
        "category": "web",
        "parameters_schema": {
            "type": "object",
            "properties": {"url": STRING, "selector": STRING},
            "required": ["url"],
        },
        "handler_type": "external",
        "handler_config": {"provider": "firecrawl", "action": "scrape"},
    },
    # --- System ------------------------------------------------------------------------------
    {
        "name": "wait",
        "display_name": "Wait",
        "description": "Pause execution for a specified duration",
        "category": "system",
        "parameters_schema": {
            "type": "object",
            "properties": {"seconds": {"type": "integer", "minimum": 1, "maximum": 3600}},
            "required": ["seconds"],
        },
        "handler_type": "internal",
        "handler_config": {"handler": "wait"},
    },
    {
        "name": "notify_user",
        "display_name": "Notify User",
        "description": "Send a notification to a user",
        "category": "system",
        "parameters_schema": {
            "type": "object",
            "properties": {
                "user_id": STRING,
                "message": STRING,
                "channel": {"type": "string", "enum": ["in_app", "email", "sms"]},
            },
            "required": ["message"],
        },
        "handler_type": "internal",
        "handler_config": {"handler": "notifyUser"},
    },
    {
        "name": "trigger_workflow",
        "display_name": "Trigger Workflow",
        "description": "Start an automation workflow",
        "category": "system",
        "parameters_schema": {
            "type": "object",
            "properties": {"workflow_id": STRING, "input_data": {"type": "object"}},
            "required": ["workflow_id"],
        },
        "handler_type": "workflow",
        "handler_config": {"action": "trigger"},
    },
]


def seed_tools(apps, schema_editor):
    Tool = apps.get_model("tools", "Tool")
    alias = schema_editor.connection.alias
    # Migrations run as the owner role, which FORCE row-level security also restricts.
    with platform_context(using=alias):
        for spec in DEFAULT_TOOLS:
            defaults = {
                "requires_modules": [],
                "requires_permissions": [],
                "is_dangerous": False,
                "is_active": True,
                **{key: value for key, value in spec.items() if key != "name"},
            }
            Tool.objects.using(alias).update_or_create(
                name=spec["name"], agency=None, is_system=True, defaults=defaults
            )


def remove_tools(apps, schema_editor):
    Tool = apps.get_model("tools", "Tool")
    alias = schema_editor.connection.alias
    with platform_context(using=alias):
        Tool.objects.using(alias).filter(
            is_system=True, name__in=[spec["name"] for spec in DEFAULT_TOOLS]
        ).delete()


class Migration(migrations.Migration):
    dependencies = [("tools", "0002_row_level_security")]

    operations = [migrations.RunPython(seed_tools, remove_tools)]
