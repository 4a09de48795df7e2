"""An agent's site, and an execution's agent and site, belong to the row's own agency.

Foreign-key checks bypass row-level security, so a plain ``site_id`` or ``agent_id`` may point
into another agency; ``Agent.clean()`` refused that only for forms. Composite foreign keys make
the database refuse it for every writer: (site_id, agency_id) must be a site of that agency,
(agent_id, agency_id) an agent of it. Deferred like Django's own foreign keys (checked at
commit). Their targets are the (id, agency) unique constraints of ``core.Site`` and ``Agent``.

On an existing database holding such a cross-agency row the migration stops with PostgreSQL's
foreign-key error naming the row: repair it (point it at its own agency's site or agent), then
migrate again.
"""

from django.conf import settings
from django.db import migrations, models

FOREIGN_KEYS = (
    ("agents_agent", "agents_agent_site_same_agency", "site_id", "core_site"),
    ("agents_execution", "agents_execution_agent_same_agency", "agent_id", "agents_agent"),
    ("agents_execution", "agents_execution_site_same_agency", "site_id", "core_site"),
)

CREATE = "\n".join(
    f"ALTER TABLE {table} ADD CONSTRAINT {name} FOREIGN KEY ({column}, agency_id)"
    f" REFERENCES {target} (id, agency_id) DEFERRABLE INITIALLY DEFERRED;"
    for table, name, column, target in FOREIGN_KEYS
)
DROP = "\n".join(
    f"ALTER TABLE {table} DROP CONSTRAINT IF EXISTS {name};" for table, name, _, _ in FOREIGN_KEYS
)


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0006_execution_big_columns_out_of_line"),
        ("core", "0005_site_id_agency_unique"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddConstraint(
            model_name="agent",
            constraint=models.UniqueConstraint(
                fields=("id", "agency"), name="agents_agent_id_agency"
            ),
        ),
        migrations.RunSQL(CREATE, DROP),
    ]
