"""The platform's ``ask_user`` tool (seed 000's clarifications): an agent asks the agency's people
a question and its run waits for the answer (tools/builtin/flow.py, approvals/questions.py)."""

from django.db import migrations

from core.tenancy import platform_context

ASK_USER = {
    "display_name": "Ask a person",
    "description": (
        "Ask the agency's people a question when you are unsure or need information you cannot "
        "get with your other tools. The run pauses until someone answers; the answer is this "
        "call's result. Offer options when you can."
    ),
    "category": "system",
    "parameters_schema": {
        "type": "object",
        "properties": {
            "question": {
                "type": "string",
                "maxLength": 2000,
                "description": "One clear question a person can answer.",
            },
            "options": {
                "type": "array",
                "items": {"type": "string", "maxLength": 200},
                "maxItems": 10,
                "description": "Possible answers to pick from (optional).",
            },
            "allow_other": {
                "type": "boolean",
                "description": "Whether a free-text answer is accepted besides the options "
                "(default true).",
            },
            "question_type": {
                "type": "string",
                "enum": ["missing_info", "choice", "confirmation", "ambiguity", "other"],
            },
        },
        "required": ["question"],
    },
    "handler_type": "internal",
    "handler_config": {"handler": "ask_user"},
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
            name="ask_user", agency=None, is_system=True, defaults=ASK_USER
        )


def remove_tool(apps, schema_editor):  # type: ignore[no-untyped-def]
    Tool = apps.get_model("tools", "Tool")
    alias = schema_editor.connection.alias
    with platform_context(using=alias):
        Tool.objects.using(alias).filter(name="ask_user", agency=None, is_system=True).delete()


class Migration(migrations.Migration):
    dependencies = [("tools", "0007_toolcall_waiting_input")]

    operations = [migrations.RunPython(add_tool, remove_tool)]
