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
