"""Row-level security on every tools table (core/rls.py)."""

from django.db import migrations

from core.rls import allow_read_shared_rows, enable_rls


class Migration(migrations.Migration):
    dependencies = [("tools", "0001_initial")]

    operations = [
        enable_rls("tools_toolcall"),
        enable_rls("tools_tool"),
        # System tools (agency NULL) are readable by every agency, writable by none.
        allow_read_shared_rows("tools_tool"),
    ]
