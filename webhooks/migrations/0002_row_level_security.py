"""Row-level security on the webhook tables (core/rls.py), and the lookup a delivery needs."""

from django.db import migrations

from core.rls import enable_rls

# A delivery finds its webhook by the id in its URL before any tenant is set: this SELECT-only
# policy shows exactly the row whose id webhooks.selectors.webhook_lookup_context() put in
# app.webhook_id (transaction-local), and nothing when the setting is empty. The same pattern as
# core_apikey's api_key_lookup (core 0004).
LOOKUP_POLICY_SQL = """
CREATE POLICY webhook_lookup ON webhooks_webhook FOR SELECT
    USING (id = NULLIF(current_setting('app.webhook_id', true), '')::uuid);
"""


class Migration(migrations.Migration):
    dependencies = [("webhooks", "0001_initial")]

    operations = [
        enable_rls("webhooks_webhook"),
        enable_rls("webhooks_webhookdelivery"),
        migrations.RunSQL(
            LOOKUP_POLICY_SQL, "DROP POLICY IF EXISTS webhook_lookup ON webhooks_webhook;"
        ),
    ]
