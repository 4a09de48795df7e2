"""Row-level security on every approvals table (core/rls.py)."""

from django.db import migrations

from core.rls import allow_read_shared_rows, enable_rls


class Migration(migrations.Migration):
    dependencies = [("approvals", "0001_initial")]

    operations = [
        enable_rls("approvals_approval"),
        enable_rls("approvals_riskrule"),
        # Platform risk rules (agency NULL) are readable by every agency.
        allow_read_shared_rows("approvals_riskrule"),
    ]
