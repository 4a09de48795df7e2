"""Row-level security on every crm table (core/rls.py)."""

from django.db import migrations

from core.rls import enable_rls


class Migration(migrations.Migration):
    dependencies = [("crm", "0001_initial")]

    operations = [
        enable_rls("crm_contact"),
        enable_rls("crm_note"),
        enable_rls("crm_task"),
        enable_rls("crm_calendarevent"),
        enable_rls("crm_emailmessage"),
        enable_rls("crm_formsubmission"),
    ]
