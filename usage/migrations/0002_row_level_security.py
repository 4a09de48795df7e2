"""Row-level security on every usage table (core/rls.py)."""

from django.db import migrations

from core.rls import allow_read_shared_rows, enable_rls


class Migration(migrations.Migration):
    dependencies = [("usage", "0001_initial")]

    operations = [
        enable_rls("usage_usagedaily"),
        enable_rls("usage_usageperiod"),
        enable_rls("usage_budget"),
        enable_rls("usage_modelprice"),
        # Platform model prices (agency NULL) are readable by every agency.
        allow_read_shared_rows("usage_modelprice"),
    ]
