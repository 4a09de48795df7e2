"""Row-level security on the outbound webhook tables (core/rls.py)."""

from django.db import migrations

from core.rls import enable_rls


class Migration(migrations.Migration):
    dependencies = [("webhooks", "0003_outbound")]

    operations = [
        enable_rls("webhooks_subscription"),
        enable_rls("webhooks_delivery"),
        enable_rls("webhooks_deliveryattempt"),
    ]
