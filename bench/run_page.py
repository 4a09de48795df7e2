"""The run page's load (issue 27 item 1): the admin's execution page of a finished 40-step run
(the observe step, 19 ReAct iterations of a ``crm_get_contact`` call and its result, the
answer), requested in this process through Django's whole stack (middleware, admin, templates)
by a staff member of the run's agency. Per request: server time (wall, median and max of the
requests after a warm-up), the response's bytes, and the SQL queries it made (with the most
repeated statements, which is where N+1 queries show).

    .venv/bin/python -m bench.run_page [--iterations 19] [--requests 10]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import re
import statistics
import time
from collections import Counter
from typing import Any

from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from agents.runtime.loop import run_execution
from bench import ROOT, common
from core import realtime, tenancy
from core.models import Role


def _shape(sql: str) -> str:
    """A statement with its literals taken out: the same query for another row counts as one."""
    sql = re.sub(r"'[^']*'", "?", sql)
    return re.sub(r"\b\d+\b", "?", sql)[:160]


def measure(url: str, client: Client, requests: int) -> dict[str, Any]:
    client.get(url)  # warm-up: templates compiled, connections open
    times, sizes, queries = [], [], []
    shapes: Counter[str] = Counter()
    for _ in range(requests):
        with CaptureQueriesContext(connection) as captured:
            started = time.perf_counter()
            response = client.get(url)
            times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, response.status_code
        sizes.append(len(response.content))
        queries.append(len(captured.captured_queries))
        shapes = Counter(_shape(q["sql"]) for q in captured.captured_queries)
    return {
        "server_ms_p50": round(statistics.median(times), 1),
        "server_ms_max": round(max(times), 1),
        "bytes": int(statistics.median(sizes)),
        "queries": int(statistics.median(queries)),
        "most_repeated_queries": [
            {"times": n, "sql": sql} for sql, n in shapes.most_common(5) if n > 1
        ],
    }


def _profile(url: str, client: Client) -> None:
    """Where one request's time goes: the functions with the most cumulative time, all of them
    and then the project's own (its panels, selectors, templates' tags)."""
    profiler = cProfile.Profile()
    profiler.runcall(client.get, url)
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out).sort_stats("cumulative")
    stats.print_stats(30)
    stats.print_stats(rf"^{re.escape(str(ROOT))}/(?!\.venv)", 25)
    print(out.getvalue())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--iterations", type=int, default=19, help="ReAct iterations (19: 40 steps)"
    )
    parser.add_argument("--requests", type=int, default=10)
    parser.add_argument("--profile", action="store_true", help="print one request's profile")
    parser.add_argument("--save-html", metavar="PATH", help="write the page to PATH")
    args = parser.parse_args()
    common.create_database()
    try:
        facts = common.machine_facts()
        with common.FakeServerProcess(common.iterations_script) as server:
            execution = common.pending_execution(common.looping_agent(server, args.iterations))
            assert run_execution(execution.id, agency_id=execution.agency_id) == "completed"
            realtime.flush()
        from tests.factories import MembershipFactory  # noqa: PLC0415 - after the database

        with tenancy.agency_context(execution.agency_id):
            steps = execution.steps.count()
        user = MembershipFactory.create(agency_id=execution.agency_id, role=Role.STAFF).user
        client = Client()
        client.force_login(user)
        url = f"/admin/agents/execution/{execution.pk}/change/"
        result = measure(url, client, args.requests)
        if args.profile:
            _profile(url, client)
        if args.save_html:
            with open(args.save_html, "wb") as out:
                out.write(client.get(url).content)
    finally:
        common.drop_database()
    print(facts.describe())
    print(json.dumps({"machine": facts.as_dict(), "steps": steps, **result}, indent=2))


if __name__ == "__main__":
    main()
