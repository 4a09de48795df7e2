"""Version 1 of every existing agent, then the checks and the index 0017 left for later.

Outside one long transaction: agents are numbered in batches, each its own short transaction, so
that runs finishing meanwhile (their stats UPDATE of the agent row) wait for one batch at most;
the foreign keys 0017 added NOT VALID are validated under a lock that lets executions be written;
the index of a version's runs is built concurrently. Runs that started before versions existed
keep ``agent_version`` NULL: which configuration they used is in their ``config_snapshot``.

A frozen copy of the configuration's JSON form (``agents.services.versions.config_of`` at the
time of writing): later changes to the fields need their own migration.
"""

from decimal import Decimal

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models

from core.tenancy import platform_context

BATCH = 500

CONFIG_FIELDS = (
    "name", "description", "avatar_url", "personality", "agent_type", "domain", "capabilities",
    "system_prompt", "constraints", "examples", "trigger_events", "trigger_schedule",
    "trigger_conditions", "llm_provider", "llm_model", "temperature", "max_tokens",
    "max_steps_per_run", "max_tool_calls_per_step", "timeout_seconds", "max_runs_per_hour",
    "max_runs_per_day", "allowed_tools", "denied_tools", "human_timeout_minutes",
    "max_corrections", "deny_may_continue",
)  # fmt: skip


def _config(agent):
    config = {}
    for name in CONFIG_FIELDS:
        value = getattr(agent, name)
        if isinstance(value, Decimal):
            value = str(value.quantize(Decimal("0.01")))
        elif isinstance(value, tuple):
            value = list(value)
        config[name] = value
    return config


def number_existing_agents(apps, schema_editor):
    Agent = apps.get_model("agents", "Agent")
    AgentVersion = apps.get_model("agents", "AgentVersion")
    alias = schema_editor.connection.alias
    after = None
    while True:
        # Migrations run as the owner role, which FORCE row-level security also restricts.
        with platform_context(using=alias):
            agents = Agent.objects.using(alias).filter(current_version__isnull=True)
            if after is not None:
                agents = agents.filter(pk__gt=after)
            batch = list(agents.order_by("pk")[:BATCH])
            if not batch:
                return
            versions = AgentVersion.objects.using(alias).bulk_create(
                AgentVersion(
                    agency_id=agent.agency_id,
                    agent_id=agent.pk,
                    number=1,
                    config=_config(agent),
                    change_summary=[],
                    created_by_id=agent.updated_by_id or agent.created_by_id,
                )
                for agent in batch
            )
            for agent, version in zip(batch, versions, strict=True):
                agent.current_version_id = version.pk
            Agent.objects.using(alias).bulk_update(batch, ["current_version"])
            after = batch[-1].pk


def forget_versions(apps, schema_editor):
    Agent = apps.get_model("agents", "Agent")
    alias = schema_editor.connection.alias
    with platform_context(using=alias):
        Agent.objects.using(alias).update(current_version=None)


class Migration(migrations.Migration):
    atomic = False  # batches of their own; VALIDATE and CREATE INDEX CONCURRENTLY outside one

    dependencies = [("agents", "0017_agent_versions")]

    operations = [
        migrations.RunPython(number_existing_agents, forget_versions, elidable=True),
        migrations.RunSQL(
            "ALTER TABLE agents_execution VALIDATE CONSTRAINT agents_execution_agent_version_id_fk",
            migrations.RunSQL.noop,
        ),
        migrations.RunSQL(
            "ALTER TABLE agents_execution VALIDATE CONSTRAINT agents_execution_version_same_agent",
            migrations.RunSQL.noop,
        ),
        AddIndexConcurrently(
            model_name="execution",
            index=models.Index(
                condition=models.Q(agent_version__isnull=False),
                fields=["agent_version"],
                name="agents_execution_version_idx",
            ),
        ),
    ]
