"""``trigger_workflow`` emits only ``ai.workflow.<name>`` events (tools/builtin/flow.py): its
description and ``workflow_id`` say so, so that the model learns the form from the tool list
rather than from a refused call. Only the platform's row; agencies' own copies are theirs."""

from django.db import migrations

from core.tenancy import platform_context

DESCRIPTION = (
    "Start an automation workflow: emits the event ai.workflow.<workflow_id>, which starts the "
    "agents subscribed to it."
)
WORKFLOW_ID = {
    "type": "string",
    "description": (
        "The workflow's name, e.g. 'lead_followup' (lowercase letters, digits, underscores), "
        "or 'ai.workflow.<name>', where the name may have dot-separated parts. Other event "
        "types cannot be triggered."
    ),
}
OLD_DESCRIPTION = "Start an automation workflow"


def _update(apps, schema_editor, *, description, workflow_id):  # type: ignore[no-untyped-def]
    Tool = apps.get_model("tools", "Tool")
    alias = schema_editor.connection.alias
    with platform_context(using=alias):
        for tool in Tool.objects.using(alias).filter(name="trigger_workflow", agency__isnull=True):
            tool.description = description
            tool.parameters_schema["properties"]["workflow_id"] = workflow_id
            tool.save(update_fields=["description", "parameters_schema"])


def forwards(apps, schema_editor):  # type: ignore[no-untyped-def]
    _update(apps, schema_editor, description=DESCRIPTION, workflow_id=WORKFLOW_ID)


def backwards(apps, schema_editor):  # type: ignore[no-untyped-def]
    _update(apps, schema_editor, description=OLD_DESCRIPTION, workflow_id={"type": "string"})


class Migration(migrations.Migration):
    dependencies = [("tools", "0005_idempotency_key_constraint")]

    operations = [migrations.RunPython(forwards, backwards)]
