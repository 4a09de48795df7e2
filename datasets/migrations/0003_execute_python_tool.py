"""``execute_python`` as a system tool (issue 30): a pandas/numpy/matplotlib script over the
agency's datasets, run in the sandbox (tools/sandbox/). A frozen copy: later changes need a new
migration."""

from django.db import migrations

from core.tenancy import platform_context

EXECUTE_PYTHON = {
    "display_name": "Run Python on datasets",
    "description": (
        "Run a short Python script (pandas, numpy, matplotlib, and the standard library's math, "
        "statistics, datetime, json, re, collections ...) over the named datasets, given as "
        "read-only CSV files /data/<name>.csv (pd.read_csv('/data/sales.csv')). Leave a "
        "DataFrame in `result` to return it as a table; open matplotlib figures come back as "
        "charts; print() output is returned. No network, no files written outside /tmp, no "
        "other imports, no dunder names; limited CPU time, memory and wall time."
    ),
    "category": "data",
    "parameters_schema": {
        "type": "object",
        "properties": {
            "code": {
                "type": "string",
                "minLength": 1,
                "maxLength": 100000,
                "description": "The Python script.",
            },
            "datasets": {
                "type": "array",
                "maxItems": 10,
                "uniqueItems": True,
                "items": {"type": "string", "pattern": "^[a-z][a-z0-9_]{0,62}$"},
                "description": "The datasets the script reads, by name (list_datasets).",
            },
        },
        "required": ["code"],
        "additionalProperties": False,
    },
    "handler_type": "internal",
    "handler_config": {"handler": "execute_python"},
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
            name="execute_python", agency=None, is_system=True, defaults=EXECUTE_PYTHON
        )


def remove_tool(apps, schema_editor):  # type: ignore[no-untyped-def]
    Tool = apps.get_model("tools", "Tool")
    alias = schema_editor.connection.alias
    with platform_context(using=alias):
        Tool.objects.using(alias).filter(
            name="execute_python", agency=None, is_system=True
        ).delete()


class Migration(migrations.Migration):
    dependencies = [("datasets", "0002_analysis_tools")]

    operations = [migrations.RunPython(add_tool, remove_tool)]
