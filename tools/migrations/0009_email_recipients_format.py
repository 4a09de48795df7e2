"""``email_send`` and ``email_draft`` say that their recipients are e-mail addresses: the
JSON Schema check (tools.validation, formats checked) then refuses a bad address before the
call, for the model and for an approver's edit of an approval alike (the handler checked it only
after a decision). Only the platform's rows; agencies' own copies are theirs."""

from django.db import migrations

from core.tenancy import platform_context

TOOLS = ("email_send", "email_draft")
ADDRESSES = {
    "type": "array",
    "items": {"type": "string", "format": "email"},
    "minItems": 1,
    "description": "The recipients' e-mail addresses.",
}
OLD = {"type": "array", "items": {"type": "string"}}


def _update(apps, schema_editor, *, to):  # type: ignore[no-untyped-def]
    Tool = apps.get_model("tools", "Tool")
    alias = schema_editor.connection.alias
    with platform_context(using=alias):
        for tool in Tool.objects.using(alias).filter(name__in=TOOLS, agency__isnull=True):
            tool.parameters_schema["properties"]["to"] = to
            tool.save(update_fields=["parameters_schema"])


def forwards(apps, schema_editor):  # type: ignore[no-untyped-def]
    _update(apps, schema_editor, to=ADDRESSES)


def backwards(apps, schema_editor):  # type: ignore[no-untyped-def]
    _update(apps, schema_editor, to=OLD)


class Migration(migrations.Migration):
    dependencies = [("tools", "0008_ask_user_tool")]

    operations = [migrations.RunPython(forwards, backwards)]
