"""The analysis tools of issue 30 as system tools (agency NULL, readable by every agency):
``list_datasets``, ``get_dataset_schema``, ``execute_sql`` and ``execute_query_plan``. They read
only; the executor applies tool policies, rate limits, risk rules and approvals to them as to
every tool. A frozen copy: later changes need a new migration."""

from django.db import migrations

from core.tenancy import platform_context

DATASET = {
    "type": "string",
    "pattern": "^[a-z][a-z0-9_]{0,62}$",
    "description": "The dataset's name, as list_datasets gives it.",
}
_COLUMN = {"type": "string", "minLength": 1, "maxLength": 200}
_NAME = {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]{0,62}$"}
_SCALAR = {"type": ["string", "number", "boolean"]}
# A frozen copy of datasets.query_plan.SCHEMA_JSON as of this migration.
QUERY_PLAN = {
    "type": "object",
    "additionalProperties": False,
    "required": ["dataset", "select"],
    "properties": {
        "dataset": DATASET,
        "select": {
            "type": "array",
            "minItems": 1,
            "maxItems": 50,
            "description": "Output columns: a column, a date column truncated to a grain, or an "
            "aggregate (count needs no column).",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "column": _COLUMN,
                    "agg": {
                        "type": "string",
                        "enum": ["count", "count_distinct", "sum", "avg", "min", "max"],
                    },
                    "grain": {
                        "type": "string",
                        "enum": ["day", "week", "month", "quarter", "year"],
                    },
                    "as": _NAME,
                },
            },
        },
        "filters": {
            "type": "array",
            "maxItems": 50,
            "description": "Conditions, all of which must hold.",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["column", "op"],
                "properties": {
                    "column": _COLUMN,
                    "op": {
                        "type": "string",
                        "enum": [
                            "eq", "neq", "gt", "gte", "lt", "lte", "in", "not_in", "contains",
                            "is_null", "not_null", "between",
                        ],
                    },
                    "value": {
                        "anyOf": [
                            _SCALAR,
                            {"type": "array", "items": _SCALAR, "minItems": 1, "maxItems": 1000},
                        ]
                    },
                },
            },
        },
        "group_by": {
            "type": "array",
            "maxItems": 20,
            "items": _COLUMN,
            "description": "Columns or select outputs to group on (every plain selected column "
            "when select has an aggregate).",
        },
        "order_by": {
            "type": "array",
            "maxItems": 10,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["column"],
                "properties": {
                    "column": _COLUMN,
                    "direction": {"type": "string", "enum": ["asc", "desc"]},
                },
            },
        },
        "limit": {"type": "integer", "minimum": 1, "maximum": 10000},
    },
}

COMMON = {
    "category": "data",
    "handler_type": "internal",
    "requires_modules": [],
    "requires_permissions": [],
    "is_dangerous": False,
    "is_active": True,
}

TOOLS = {
    "list_datasets": {
        "display_name": "List datasets",
        "description": (
            "List the agency's datasets (uploaded files and CRM queries): name, SQL table "
            "(datasets.<name>), title, description, row count and column names."
        ),
        "parameters_schema": {"type": "object", "properties": {}, "additionalProperties": False},
        "handler_config": {"handler": "list_datasets"},
    },
    "get_dataset_schema": {
        "display_name": "Get dataset schema",
        "description": (
            "The columns of one dataset: name, type, sample values and the staff's description "
            "of each, and its row count. Read it before writing SQL or a query plan."
        ),
        "parameters_schema": {
            "type": "object",
            "properties": {"dataset": DATASET},
            "required": ["dataset"],
            "additionalProperties": False,
        },
        "handler_config": {"handler": "get_dataset_schema"},
    },
    "execute_sql": {
        "display_name": "Run SQL on datasets",
        "description": (
            "Run one read-only DuckDB SELECT (or WITH ... SELECT) over the agency's datasets, "
            "named datasets.<name>. No other statement, no file, URL or extension function. "
            "Returns the first rows and a downloadable table of the whole result."
        ),
        "parameters_schema": {
            "type": "object",
            "properties": {
                "sql": {"type": "string", "minLength": 1, "maxLength": 20000},
            },
            "required": ["sql"],
            "additionalProperties": False,
        },
        "handler_config": {"handler": "execute_sql"},
    },
    "execute_query_plan": {
        "display_name": "Run a query plan on a dataset",
        "description": (
            "Query one dataset with a structured plan (select with aggregates or date grains, "
            "filters, group_by, order_by, limit) instead of SQL; it is compiled to SQL for you. "
            "Returns the first rows, the SQL and a downloadable table of the whole result."
        ),
        "parameters_schema": QUERY_PLAN,
        "handler_config": {"handler": "execute_query_plan"},
    },
}


def add_tools(apps, schema_editor):  # type: ignore[no-untyped-def]
    Tool = apps.get_model("tools", "Tool")
    alias = schema_editor.connection.alias
    with platform_context(using=alias):
        for name, fields in TOOLS.items():
            Tool.objects.using(alias).update_or_create(
                name=name, agency=None, is_system=True, defaults={**COMMON, **fields}
            )


def remove_tools(apps, schema_editor):  # type: ignore[no-untyped-def]
    Tool = apps.get_model("tools", "Tool")
    alias = schema_editor.connection.alias
    with platform_context(using=alias):
        Tool.objects.using(alias).filter(name__in=list(TOOLS), agency=None, is_system=True).delete()


class Migration(migrations.Migration):
    dependencies = [("datasets", "0001_initial"), ("tools", "0014_mcp_timeout_label")]

    operations = [migrations.RunPython(add_tools, remove_tools)]
