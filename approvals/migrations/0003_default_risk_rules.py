"""Seed 004's ``assessRisk`` rules as platform risk rules (agency NULL, readable by every agency).

As in the seed, high and critical risk needs a human approval, medium does not. The seed's
e-mail rule is "``to`` has at least 10 recipients"; the condition says so in data.
A frozen copy: later changes need a new migration.
"""

from django.db import migrations

from core.tenancy import platform_context

RULES = [
    {
        "name": "Bulk e-mail",
        "description": "Sending to 10 or more recipients at once.",
        "tool_pattern": "email_send",
        "condition": {"argument": "to", "min_items": 10},
        "risk_level": "high",
        "requires_approval": True,
        "priority": 10,
    },
    {
        "name": "Deleting CRM data",
        "description": "Any CRM delete.",
        "tool_pattern": "crm_delete_*",
        "condition": {},
        "risk_level": "critical",
        "requires_approval": True,
        "priority": 20,
    },
    {
        "name": "Data export",
        "description": "Exporting platform data.",
        "tool_pattern": "data_export",
        "condition": {},
        "risk_level": "high",
        "requires_approval": True,
        "priority": 30,
    },
    {
        "name": "Settings changes",
        "description": "Changing settings.",
        "tool_pattern": "settings_*",
        "condition": {},
        "risk_level": "medium",
        "requires_approval": False,
        "priority": 40,
    },
]


def seed_rules(apps, schema_editor):
    RiskRule = apps.get_model("approvals", "RiskRule")
    alias = schema_editor.connection.alias
    # Migrations run as the owner role, which FORCE row-level security also restricts.
    with platform_context(using=alias):
        for spec in RULES:
            defaults = {key: value for key, value in spec.items() if key != "name"}
            RiskRule.objects.using(alias).update_or_create(
                name=spec["name"], agency=None, defaults=defaults
            )


def remove_rules(apps, schema_editor):
    RiskRule = apps.get_model("approvals", "RiskRule")
    alias = schema_editor.connection.alias
    with platform_context(using=alias):
        RiskRule.objects.using(alias).filter(
            agency=None, name__in=[spec["name"] for spec in RULES]
        ).delete()


class Migration(migrations.Migration):
    dependencies = [("approvals", "0002_row_level_security")]

    operations = [migrations.RunPython(seed_rules, remove_rules)]
