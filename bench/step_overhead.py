"""Per-step overhead of the runtime, through a real Celery worker, with a zero-latency model.

One execution of 100 ReAct iterations (think -> crm_get_contact -> think ...) then a final
answer, everything persisted and broadcast. For each committed step:

    overhead = time from the previous step's commit to this step's, minus the model call
               (think steps) or minus the tool handler's own work (act steps)

reported as p50/p99, above the machine's one round trip + one durable commit measured in the
same run. Also: commits per step (pg_stat_database) and bytes per step (the step rows' sizes,
first 20 steps vs last 20, and WAL bytes per step for a short and a long run).

    .venv/bin/python -m bench.step_overhead [--iterations 100]
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from typing import Any

from agents.llm.fake_server import FakeProviderServer
from agents.llm.fake_server.script import by_turn, text_reply, tool_call_reply
from agents.models import Execution, StepType
from agents.services import execution_create
from bench import common
from core import realtime, tenancy
from crm.models import Contact
from tests.processes import wait_for
from tools.models import ToolCall


def run_once(server: FakeProviderServer, iterations: int) -> dict[str, Any]:
    agent = common.make_agent(server)
    with tenancy.agency_context(agent.agency_id):
        Contact.objects.create(agency_id=agent.agency_id, first_name="Ada", email="ada@x.io")
    call = tool_call_reply("crm_get_contact", {"email": "ada@x.io"})
    server.set_responder(
        by_turn(*([call] * iterations), then=text_reply("Done.")), key=agent.llm_model
    )
    before = common.database_counters()
    with tenancy.agency_context(agent.agency_id):
        execution = execution_create(agent=agent, input="Look Ada up, again and again.")
    assert execution is not None
    execution = wait_for(execution, timeout=600)
    realtime.flush()
    time.sleep(0.5)  # let the event dispatch task of the run commit too
    after = common.database_counters()
    assert execution.status == "completed", execution.error
    with tenancy.agency_context(agent.agency_id):
        steps = list(
            Execution.objects.get(pk=execution.pk)
            .steps.order_by("step_number")
            .values("step_number", "step_type", "completed_at", "llm_response", "id")
        )
        sizes = _row_sizes([s["id"] for s in steps])
        tool_ms = {
            step_id: common.elapsed_ms(started, completed)
            for step_id, started, completed in ToolCall.objects.filter(
                execution_id=execution.id
            ).values_list("step_id", "started_at", "completed_at")
        }
        writers = common.writing_transactions(execution.id)
    overheads: list[float] = []
    model_ms: list[float] = []
    handler_ms: list[float] = []
    for previous, step in itertools.pairwise(steps):
        gap = (step["completed_at"] - previous["completed_at"]).total_seconds() * 1000  # type: ignore[operator]
        latency = 0.0
        if step["step_type"] == StepType.THINK:
            latency = float(step["llm_response"]["latency_ms"])  # type: ignore[index]
            model_ms.append(latency)
        elif step["id"] in tool_ms:
            latency = float(tool_ms[step["id"]] or 0)
            handler_ms.append(latency)
        overheads.append(gap - latency)
    committed = len(steps) - 1  # the first (observe) step commits with the claim
    return {
        "steps": committed,
        "overhead_ms": overheads,
        "model_call_ms": model_ms,
        "tool_ms": handler_ms,
        "commits": after["commits"] - before["commits"],
        "writing_transactions": writers,
        "wal_bytes": after["wal_bytes"] - before["wal_bytes"],
        "row_bytes_first20": sum(sizes[1:21]) / 20,
        "row_bytes_last20": sum(sizes[-20:]) / 20,
    }


def _row_sizes(step_ids: list[Any]) -> list[int]:
    from django.db import connection  # noqa: PLC0415

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT s.id, pg_column_size(s.*) + coalesce(("
            "  SELECT sum(pg_column_size(t.*)) FROM tools_toolcall t"
            "  WHERE t.step_id = s.id), 0)"
            " FROM agents_executionstep s WHERE s.id = ANY(%s)",
            [step_ids],
        )
        by_id = dict(cursor.fetchall())
    return [int(by_id[i]) for i in step_ids]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=100)
    args = parser.parse_args()
    common.create_database()
    facts = common.machine_facts()
    worker = common.worker(concurrency=4).start()
    try:
        with FakeProviderServer() as server:
            run_once(server, 3)  # warm-up: imports, connections, caches
            short = run_once(server, 10)
            result = run_once(server, args.iterations)
    finally:
        worker.stop()
        common.drop_database()
    floor = facts.round_trip_ms + facts.commit_ms
    p50 = common.percentile(result["overhead_ms"], 50)
    p99 = common.percentile(result["overhead_ms"], 99)
    report = {
        "machine": facts.as_dict(),
        "steps": result["steps"],
        "overhead_p50_ms": round(p50, 3),
        "overhead_p99_ms": round(p99, 3),
        "overhead_p50_above_rt_plus_commit_ms": round(p50 - floor, 3),
        "overhead_p99_above_rt_plus_commit_ms": round(p99 - floor, 3),
        "model_call_p50_ms": round(common.percentile(result["model_call_ms"], 50), 3),
        "tool_call_p50_ms": round(common.percentile(result["tool_ms"], 50), 3),
        "writing_transactions_per_step": round(result["writing_transactions"] / result["steps"], 3),
        "all_commits_per_step_incl_read_only": round(result["commits"] / result["steps"], 3),
        "wal_bytes_per_step_short_run": round(short["wal_bytes"] / short["steps"]),
        "wal_bytes_per_step_long_run": round(result["wal_bytes"] / result["steps"]),
        "row_bytes_per_step_first20": round(result["row_bytes_first20"]),
        "row_bytes_per_step_last20": round(result["row_bytes_last20"]),
    }
    print(facts.describe())
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
