"""Side by side with the strongest peer, in the same run: LangGraph's prebuilt ReAct agent with
its PostgreSQL checkpointer in ``sync`` durability, against AgentDesk's runtime — same fake
model (OpenAI wire format), same tool (``crm_get_contact`` on the same data), same database.

Per ReAct iteration (model reply + tool result), each side reports: overhead (wall time minus
the model call and minus the tool's own work), writing commits, and WAL bytes written early
vs late in a long run (flat or growing with history). Both run in this process so that neither
gets a worker's or a broker's cost the other does not; the fake model runs in a process of its
own (as in the other benchmarks: its CPU is neither side's).

    .venv/bin/python -m bench.peer_langgraph [--iterations 60]
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from typing import Any

from agents.runtime.loop import run_execution
from bench import common
from core import tenancy
from tools.handlers import ToolContext
from tools.registry import get_handler


def wal_position() -> int:
    return common.database_counters()["wal_bytes"]


# --- AgentDesk ---------------------------------------------------------------------------------


def run_agentdesk(server: Any, iterations: int) -> dict[str, Any]:
    agent = common.looping_agent(server, iterations)
    execution = common.pending_execution(agent)
    before = common.database_counters()
    started = time.perf_counter()
    assert run_execution(execution.id, agency_id=agent.agency_id) == "completed"
    wall_ms = (time.perf_counter() - started) * 1000
    after = common.database_counters()
    with tenancy.agency_context(agent.agency_id):  # the rows are under row-level security
        commits = common.writing_transactions(execution.id)
    with tenancy.agency_context(agent.agency_id):
        steps = list(
            execution.steps.order_by("step_number").values(
                "step_type", "llm_response", "duration_ms", "id", "completed_at"
            )
        )
        from tools.models import ToolCall  # noqa: PLC0415

        tool_ms = sum(
            common.elapsed_ms(started, completed)
            for started, completed in ToolCall.objects.filter(
                execution_id=execution.id
            ).values_list("started_at", "completed_at")
        )
    model_ms = sum(
        s["llm_response"]["latency_ms"]  # type: ignore[index]
        for s in steps
        if s["step_type"] == "think"
    )
    return {
        "wall_ms": wall_ms,
        "model_ms": model_ms,
        "tool_ms": float(tool_ms),
        "commits": commits,
        "wal_bytes": after["wal_bytes"] - before["wal_bytes"],
    }


# --- LangGraph -----------------------------------------------------------------------------------


def run_langgraph(server: Any, iterations: int, *, sample_wal: bool = False) -> dict[str, Any]:
    from langchain_core.callbacks import BaseCallbackHandler  # noqa: PLC0415
    from langchain_core.tools import tool  # noqa: PLC0415
    from langchain_openai import ChatOpenAI  # noqa: PLC0415
    from langgraph.checkpoint.postgres import PostgresSaver  # noqa: PLC0415
    from langgraph.prebuilt import create_react_agent  # noqa: PLC0415
    from pydantic import SecretStr  # noqa: PLC0415

    agent = common.looping_agent(server, iterations)
    handler = get_handler("crm_get_contact")
    assert handler is not None
    tool_time = [0.0]

    @tool
    def crm_get_contact(email: str) -> dict[str, Any]:
        """Look a contact up by e-mail."""
        from django.db import connection  # noqa: PLC0415

        started = time.perf_counter()
        try:
            with tenancy.agency_context(agent.agency_id):
                context = ToolContext(
                    agency_id=agent.agency_id, site_id=agent.site_id, agent_id=agent.id,
                    execution_id=uuid.uuid4(), tool_call_id="x", idempotency_key=str(uuid.uuid4()),
                )  # fmt: skip
                result = handler(context, {"email": email})
        finally:
            # LangGraph runs tools on its own threads: give their connection back to the pool.
            connection.close()
        tool_time[0] += (time.perf_counter() - started) * 1000
        return result  # type: ignore[return-value]

    class ModelTimer(BaseCallbackHandler):
        def __init__(self) -> None:
            self.started: dict[Any, float] = {}
            self.total_ms = 0.0

        def on_chat_model_start(
            self, serialized: Any, messages: Any, *, run_id: Any, **_: Any
        ) -> None:
            self.started[run_id] = time.perf_counter()

        def on_llm_end(self, response: Any, *, run_id: Any, **_: Any) -> None:
            self.total_ms += (time.perf_counter() - self.started.pop(run_id)) * 1000

    timer = ModelTimer()
    model = ChatOpenAI(
        model=agent.llm_model, base_url=server.openai_base_url, api_key=SecretStr("bench-key"),
        max_retries=0, temperature=0.7,
    )  # fmt: skip
    wal_per_iteration: list[int] = []
    with PostgresSaver.from_conn_string(common.database_conninfo("owner")) as saver:
        saver.setup()
        graph = create_react_agent(model, [crm_get_contact], checkpointer=saver)
        thread_id = str(uuid.uuid4())
        config: Any = {
            "configurable": {"thread_id": thread_id},
            "recursion_limit": 2 * iterations + 10,
            "callbacks": [timer],
        }
        inputs = {"messages": [("user", "Look Ada up, again and again.")]}
        before = common.database_counters()
        started = time.perf_counter()
        if sample_wal:
            last = wal_position()
            for update in graph.stream(inputs, config, stream_mode="updates", durability="sync"):
                if "tools" in update:  # one iteration ended with its tool result
                    now = wal_position()
                    wal_per_iteration.append(now - last)
                    last = now
        else:
            graph.invoke(inputs, config, durability="sync")
        wall_ms = (time.perf_counter() - started) * 1000
        after = common.database_counters()
    commits = common.langgraph_writing_transactions(thread_id)
    return {
        "wall_ms": wall_ms,
        "model_ms": timer.total_ms,
        "tool_ms": tool_time[0],
        "commits": commits,
        "wal_bytes": after["wal_bytes"] - before["wal_bytes"],
        "wal_per_iteration": wal_per_iteration,
    }


# --- report ------------------------------------------------------------------------------------


def per_iteration(result: dict[str, Any], iterations: int) -> dict[str, float]:
    overhead = result["wall_ms"] - result["model_ms"] - result["tool_ms"]
    return {
        "overhead_ms": round(overhead / (iterations + 1), 3),
        # What the overhead is taken from: where a cost lands (model, tool, overhead) can move.
        "wall_ms": round(result["wall_ms"] / (iterations + 1), 3),
        "model_ms": round(result["model_ms"] / (iterations + 1), 3),
        "tool_ms": round(result["tool_ms"] / (iterations + 1), 3),
        "commits": round(result["commits"] / (iterations + 1), 2),
        "wal_bytes": round(result["wal_bytes"] / (iterations + 1)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=60)
    args = parser.parse_args()
    common.create_database()
    try:
        facts = common.machine_facts()
        with common.FakeServerProcess(common.iterations_script) as server:
            run_agentdesk(server, 3)  # warm-up both sides
            run_langgraph(server, 3)
            ours = [run_agentdesk(server, args.iterations) for _ in range(3)]
            peer = [run_langgraph(server, args.iterations) for _ in range(3)]
            ours_short = run_agentdesk(server, 10)
            peer_growth = run_langgraph(server, args.iterations, sample_wal=True)
    finally:
        common.drop_database()
    best_ours = min(
        (per_iteration(r, args.iterations) for r in ours), key=lambda r: r["overhead_ms"]
    )
    best_peer = min(
        (per_iteration(r, args.iterations) for r in peer), key=lambda r: r["overhead_ms"]
    )
    growth = peer_growth["wal_per_iteration"]
    report = {
        "machine": facts.as_dict(),
        "iterations": args.iterations,
        "agentdesk_per_iteration": best_ours,
        "agentdesk_wal_bytes_per_iteration_10_vs_long": [
            per_iteration(ours_short, 10)["wal_bytes"], best_ours["wal_bytes"],
        ],
        "langgraph_per_iteration": best_peer,
        "langgraph_wal_bytes_first5_vs_last5": [
            round(sum(growth[:5]) / 5), round(sum(growth[-5:]) / 5),
        ],
        "overhead_ratio_langgraph_over_agentdesk": round(
            best_peer["overhead_ms"] / best_ours["overhead_ms"], 2
        ),
    }  # fmt: skip
    print(facts.describe())
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
