"""``email_send`` is dangerous by default (issue 4): every send waits for a human's approval
unless an agency changes the flag. The seed's INSERT left it false."""

from django.db import migrations

from core.tenancy import platform_context


def set_dangerous(apps, schema_editor, value=True):  # type: ignore[no-untyped-def]
    Tool = apps.get_model("tools", "Tool")
    with platform_context(using=schema_editor.connection.alias):
        Tool.objects.using(schema_editor.connection.alias).filter(
            name="email_send", agency__isnull=True
        ).update(is_dangerous=value)


def unset_dangerous(apps, schema_editor):  # type: ignore[no-untyped-def]
    set_dangerous(apps, schema_editor, value=False)


class Migration(migrations.Migration):
    dependencies = [("tools", "0003_default_tools")]

    operations = [migrations.RunPython(set_dangerous, unset_dangerous)]
