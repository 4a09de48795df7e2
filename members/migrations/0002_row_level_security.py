"""Row-level security on invitations (core/rls.py), and the token lookup of the accept page."""

from django.db import migrations

from core.rls import enable_rls

# The accept page has no login and no tenant: this SELECT-only policy shows exactly the row whose
# token hash members.selectors.invitation_lookup_context() put in the transaction-local setting,
# and nothing when it is empty (as core 0004's api_key_lookup does for API keys).
LOOKUP_POLICY_SQL = """
CREATE POLICY invitation_lookup ON members_invitation FOR SELECT
    USING (token_hash = NULLIF(current_setting('app.invitation_token_hash', true), ''));
"""


class Migration(migrations.Migration):
    dependencies = [("members", "0001_initial")]

    operations = [
        enable_rls("members_invitation"),
        migrations.RunSQL(
            LOOKUP_POLICY_SQL, "DROP POLICY IF EXISTS invitation_lookup ON members_invitation;"
        ),
    ]
