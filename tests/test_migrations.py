"""Every model change is covered by a migration (ours and the third-party apps')."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_no_app_has_model_changes_without_a_migration() -> None:
    out = io.StringIO()
    try:
        call_command("makemigrations", "--check", "--dry-run", stdout=out, stderr=out)
    except SystemExit as exit_:  # --check exits 1 when a migration is missing
        pytest.fail(f"makemigrations --check exited {exit_.code}:\n{out.getvalue()}")


@pytest.mark.django_db
def test_the_trigger_log_skip_reasons_check_is_validated_and_takes_the_new_reason() -> None:
    """Migration 0012 adds it NOT VALID and 0014 validates it (no long lock on a big table)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT convalidated, pg_get_constraintdef(oid) FROM pg_constraint"
            " WHERE conname = 'agents_triggerlog_skip_reason_valid'"
        )
        validated, definition = cursor.fetchone()
    assert validated
    assert "'chain_too_deep'" in definition
