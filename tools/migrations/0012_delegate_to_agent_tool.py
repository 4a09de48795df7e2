"""The platform's ``delegate_to_agent`` tool (issue 19, teams of agents): an agent hands a
sub-task to another agent of its agency and its run waits for that run's result (teams/)."""

from django.db import migrations

from core.tenancy import platform_context

DELEGATE = {
    "display_name": "Delegate to another agent",
    "description": (
        "Hand a sub-task to another agent of your agency, by its slug, with a clear instruction "
        "and any structured input it needs. Your run pauses until that agent's run ends; its "
        "answer (or why it failed) is this call's result. It can use only tools you can use, "
        "and has at most your remaining time and a share of your budget."
    ),
    "category": "system",
    "parameters_schema": {
        "type": "object",
        "properties": {
            "agent": {
                "type": "string",
                "maxLength": 100,
                "description": "The slug of the agent to hand the task to.",
            },
            "instruction": {
                "type": "string",
                "minLength": 1,
                "maxLength": 8000,
                "description": "What the other agent should do and answer, self-contained.",
            },
            "input": {
                "type": "object",
                "description": "Structured input for the task (optional).",
            },
        },
        "required": ["agent", "instruction"],
    },
    "handler_type": "internal",
    "handler_config": {"handler": "delegate_to_agent"},
    "requires_modules": [],
    "requires_permissions": [],
    "is_dangerous": False,
    "is_active": True,
}


def add_tool(apps, schema_editor):  # type: ignore[no-untyped-def]
    Tool = apps.get_model("tools", "Tool")
    alias = schema_editor.connection.alias
    with platform_context(using=alias):
        Tool.objects.using(alias).update_or_create(
            name="delegate_to_agent", agency=None, is_system=True, defaults=DELEGATE
        )


def remove_tool(apps, schema_editor):  # type: ignore[no-untyped-def]
    Tool = apps.get_model("tools", "Tool")
    alias = schema_editor.connection.alias
    with platform_context(using=alias):
        Tool.objects.using(alias).filter(
            name="delegate_to_agent", agency=None, is_system=True
        ).delete()


class Migration(migrations.Migration):
    # The plan said 0010, but H5's 0011 is in the tree already: two leaves would stop every
    # `migrate` (the lead checks this at merge).
    dependencies = [("tools", "0011_mcp_servers")]

    operations = [migrations.RunPython(add_tool, remove_tool)]
