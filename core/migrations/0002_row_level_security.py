from django.db import migrations

from core.rls import FUNCTIONS_REVERSE_SQL, FUNCTIONS_SQL, allow_read_own_rows, enable_rls


class Migration(migrations.Migration):
    dependencies = [("core", "0001_initial")]

    operations = [
        migrations.RunSQL(FUNCTIONS_SQL, FUNCTIONS_REVERSE_SQL),
        # The agency table is its own tenant column: a member sees only their agency's row.
        enable_rls("core_agency", column="id"),
        enable_rls("core_site"),
        enable_rls("core_membership"),
        allow_read_own_rows("core_membership", name="membership_self_read"),
    ]
