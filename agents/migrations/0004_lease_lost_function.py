"""``agentdesk_lease_lost(execution)``: raises SQLSTATE AD001.

The runtime's step statement ends with the execution UPDATE fenced by ``lease_owner``; when it
matches no row the statement calls this function, so the error aborts the transaction on the
server and the COMMIT sent in the same round trip (pipeline mode) never applies the step's rows.
"""

from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION agentdesk_lease_lost(execution uuid) RETURNS timestamptz
    LANGUAGE plpgsql VOLATILE
    AS $$
BEGIN
    RAISE EXCEPTION 'the lease on execution % is no longer held by this worker', execution
        USING ERRCODE = 'AD001';
END
$$;
"""


class Migration(migrations.Migration):
    dependencies = [("agents", "0003_agent_templates")]

    operations = [
        migrations.RunSQL(CREATE, "DROP FUNCTION IF EXISTS agentdesk_lease_lost(uuid);"),
    ]
