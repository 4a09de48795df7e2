"""Row-level security on the single sign-on tables (core/rls.py), and the lookup a sign-in needs."""

from django.db import migrations

from core.rls import enable_rls

# A sign-in finds its provider by the sign-in name in its URL before anyone is logged in: this
# SELECT-only policy shows exactly the row whose slug sso.selectors.provider_lookup_context() put
# in app.sso_slug (transaction-local), and nothing when the setting is empty (webhooks 0002).
LOOKUP_POLICY_SQL = """
CREATE POLICY sso_provider_lookup ON sso_ssoprovider FOR SELECT
    USING (slug = NULLIF(current_setting('app.sso_slug', true), ''));
"""


class Migration(migrations.Migration):
    dependencies = [("sso", "0001_initial")]

    operations = [
        enable_rls("sso_ssoprovider"),
        enable_rls("sso_ssoidentity"),
        migrations.RunSQL(
            LOOKUP_POLICY_SQL, "DROP POLICY IF EXISTS sso_provider_lookup ON sso_ssoprovider;"
        ),
    ]
