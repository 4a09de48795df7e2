"""Shared set-up of the benchmarks: a private database on the embedded (or configured) servers,
migrated like the test database, a real Celery worker, the fake provider server, and agents."""

from __future__ import annotations

import os
import statistics
import sys
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("AGENTDESK_TEST_DB", f"agentdesk_bench_{os.getpid()}")
os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings.test"
os.environ.setdefault("LOG_LEVEL", "WARNING")

import django  # noqa: E402

django.setup()

import psycopg  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from psycopg import sql  # noqa: E402

from bench.machine import MachineFacts, measure  # noqa: E402
from core import db_roles  # noqa: E402


def database_conninfo(alias: str = "owner") -> str:
    return db_roles.conninfo_from_settings(settings.DATABASES[alias])


def create_database() -> None:
    from tests.conftest import _create_test_database  # noqa: PLC0415 - the same set-up as tests

    _create_test_database()
    call_command("migrate", interactive=False, verbosity=0)


def drop_database() -> None:
    from django.db import connections  # noqa: PLC0415

    from tests.conftest import _maintenance_conninfo  # noqa: PLC0415

    connections.close_all()
    with psycopg.connect(_maintenance_conninfo(), autocommit=True) as conn:
        name = settings.DATABASES["owner"]["NAME"]
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def machine_facts() -> MachineFacts:
    return measure(database_conninfo("owner"))


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def database_counters() -> dict[str, int]:
    """Commits of the bench database and the WAL position (bytes written, cluster-wide)."""
    with psycopg.connect(database_conninfo("owner"), autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(
            "SELECT xact_commit, pg_current_wal_lsn() - '0/0'::pg_lsn"
            " FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    assert row is not None
    return {"commits": int(row[0]), "wal_bytes": int(row[1])}


def make_agent(server: Any, *, kind: str = "openai", **fields: Any) -> Any:
    """An active agent of a new agency whose provider is the fake server."""
    from agents.models import LLMProvider  # noqa: PLC0415
    from core import tenancy  # noqa: PLC0415
    from tests.agents.factories import AgentFactory  # noqa: PLC0415
    from tests.factories import AgencyFactory, SiteFactory  # noqa: PLC0415

    agency = AgencyFactory.create()
    site = SiteFactory.create(agency=agency)
    with tenancy.agency_context(agency.id):
        provider = LLMProvider(
            agency=agency,
            provider_name=kind,
            api_endpoint=server.anthropic_base_url if kind == "anthropic" else server.openai_base_url,
        )
        provider.set_api_key("bench-key-not-real")
        provider.save()
    defaults: dict[str, Any] = {
        "allowed_tools": ["crm_get_contact"],
        "llm_provider": kind,
        "llm_model": f"bench-{uuid.uuid4().hex[:10]}",
        "max_steps_per_run": 1000,
        "max_runs_per_hour": 100_000,
        "max_runs_per_day": 100_000,
        "timeout_seconds": 3600,
    }
    defaults.update(fields)
    return AgentFactory.create(agency=agency, site=site, **defaults)
