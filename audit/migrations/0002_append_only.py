"""Row-level security on the audit tables (core/rls.py), entries append-only, and the purge.

* The tenant policy: an agency's entries are its own; entries with no agency (the platform
  chain) are seen and written only in a platform context.
* ``audit_entry_append_only``: UPDATE of an entry is refused for every role; DELETE is refused
  unless it is a cascade from the agency's own deletion (a foreign key's action: trigger depth
  above 1) or done by the table's owner, which the runtime role reaches only through
  ``audit_purge()``. The owner role (migrations) can still disable the trigger: that is what the
  hash chain is for (``manage.py audit_verify`` finds the changed row).
* ``audit_purge(agency, limit)``: SECURITY DEFINER (runs as the owner, still under the tenant
  policy, which FORCE applies to the owner too). It reads the agency's audit_retention_days
  itself, deletes at most ``limit`` of the oldest entries (a prefix of the chain, up to the
  first entry still inside the retention) and moves the chain's anchor to the last one deleted.
"""

from django.db import migrations

from core.rls import enable_rls

APPEND_ONLY_SQL = """
CREATE FUNCTION audit_entry_append_only() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND (
        pg_trigger_depth() > 1
        OR current_user = (SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = TG_RELID)
    ) THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'audit entries are append-only (% refused)', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE TRIGGER audit_entry_append_only BEFORE UPDATE OR DELETE ON audit_auditentry
    FOR EACH ROW EXECUTE FUNCTION audit_entry_append_only();

CREATE FUNCTION audit_purge(p_agency uuid, p_limit integer) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    v_days integer;
    v_cut bigint;
    v_last_seq bigint;
    v_last_hash varchar;
    v_count integer;
BEGIN
    SELECT audit_retention_days INTO v_days FROM core_agency WHERE id = p_agency;
    IF v_days IS NULL THEN
        RETURN 0;
    END IF;
    -- Writers lock the chain's head too: no entry is appended while the anchor moves.
    PERFORM 1 FROM audit_auditchain WHERE agency_id = p_agency FOR UPDATE;
    SELECT min(seq) INTO v_cut FROM audit_auditentry
        WHERE agency_id = p_agency AND at >= now() - make_interval(days => v_days);
    SELECT seq, hash INTO v_last_seq, v_last_hash FROM (
        SELECT seq, hash FROM audit_auditentry
        WHERE agency_id = p_agency AND (v_cut IS NULL OR seq < v_cut)
        ORDER BY seq LIMIT p_limit
    ) oldest ORDER BY seq DESC LIMIT 1;
    IF v_last_seq IS NULL THEN
        RETURN 0;
    END IF;
    DELETE FROM audit_auditentry WHERE agency_id = p_agency AND seq <= v_last_seq;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    UPDATE audit_auditchain SET anchor_seq = v_last_seq, anchor_hash = v_last_hash
        WHERE agency_id = p_agency;
    RETURN v_count;
END $$;
"""

APPEND_ONLY_REVERSE_SQL = """
DROP FUNCTION IF EXISTS audit_purge(uuid, integer);
DROP TRIGGER IF EXISTS audit_entry_append_only ON audit_auditentry;
DROP FUNCTION IF EXISTS audit_entry_append_only();
"""


class Migration(migrations.Migration):
    dependencies = [("audit", "0001_initial")]

    operations = [
        enable_rls("audit_auditentry"),
        enable_rls("audit_auditchain"),
        migrations.RunSQL(APPEND_ONLY_SQL, APPEND_ONLY_REVERSE_SQL),
    ]
