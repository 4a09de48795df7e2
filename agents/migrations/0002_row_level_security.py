"""Row-level security on every agents table (core/rls.py)."""

from django.db import migrations

from core.rls import allow_read_shared_rows, enable_rls


class Migration(migrations.Migration):
    dependencies = [("agents", "0001_initial")]

    operations = [
        enable_rls("agents_agent"),
        enable_rls("agents_agentgoal"),
        enable_rls("agents_execution"),
        enable_rls("agents_executionstep"),
        enable_rls("agents_triggerlog"),
        enable_rls("agents_statetransition"),
        enable_rls("agents_decisionpoint"),
        enable_rls("agents_agentmessage"),
        enable_rls("agents_llmprovider"),
        enable_rls("agents_agenttemplate"),
        # Platform agent templates (agency NULL) are readable by every agency.
        allow_read_shared_rows("agents_agenttemplate"),
    ]
