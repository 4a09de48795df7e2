"""What the context window saves: per model call request size, and the run's tokens and cost, of
one long run with the window off and on (issue 17).

One agent per setting, one run through a real Celery worker: ``--steps`` steps (default 500:
``--steps / 2`` ``crm_get_contact`` calls, each a think and an act step, then the final answer),
the looked-up contact a sizeable record (~1.5 KB of JSON: fields, custom fields, three notes).
Settings: ``context_token_budget`` 0 (the window off: every request carries the whole history)
and each of ``--budgets`` (default 32,000 and 4,000 tokens: older turns summarised by the model
into a ``reflect`` step).

The fake provider (its own process; the real ``openai`` SDK talks to it) answers by counting the
run's requests, not its turns (``by_turn`` counts assistant messages, which the window trims),
and reports as the prompt tokens of every call the request body's bytes / 4 (the window's own
estimate: tool definitions and JSON framing included, as a provider bills them); a summary
request gets a ~600-character summary. Prices: the agency's ``ModelPrice`` for the model,
``--input-price`` / ``--output-price`` USD per million tokens (default 2.50 / 10.00).

Per setting: per model call (summaries apart) the request body's bytes, p50 / max / last; the
bytes sent in all (summary requests included); prompt tokens as the fake provider reported them;
the run's ``tokens_total``, ``cost_usd`` and ``llm_call_count`` as the runtime recorded them, and
the agent's ``UsageDaily`` rows; the summary calls (``reflect`` steps), their tokens and cost;
the run's wall time (from ``execution_create`` to the run's end seen in the database). Then the
ratios of each budget to the window off.

    .venv/bin/python -m bench.context_window [--steps 500] [--budgets 32000,4000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
import uuid
from decimal import Decimal
from typing import Any

from django.db.models import Count, Sum

from agents.models import ExecutionStatus, StepType
from agents.runtime.context_window import CHARS_PER_TOKEN, SUMMARISER_PROMPT
from agents.services import execution_create
from bench import common
from core import tenancy
from crm.models import Contact, Note
from devkit.fake_server.script import RecordedRequest, Step, text_reply, tool_call_reply
from tests.processes import wait_for
from usage.models import ModelPrice, UsageDaily

SUMMARISER = SUMMARISER_PROMPT.split(".")[0]
INSTRUCTION = (
    "Look Ada up with crm_get_contact again and again until told otherwise, then say you are done."
)
EMAIL = "ada.lovelace@analytical-engines.example"
NOTES = [
    "Called about the renewal of the analytical engine maintenance contract: she wants the "
    "quote split by module (mill, store, printer) and asked whether the punched-card reader "
    "upgrade can be delivered before the end of the quarter. Follow up with the updated price "
    "list and the delivery calendar.",
    "Meeting notes: the board approved the budget for the second engine; procurement needs "
    "three references from clients of similar size, the signed data processing agreement and "
    "proof of insurance. Ada is the decision maker, Charles signs off on anything above 50k.",
    "Support ticket summary: intermittent jams of the card feeder at high speed, traced to "
    "humidity in the machine room. Recommended a dehumidifier and a firmware update of the "
    "feeder controller; she asked for an on-site visit next month to check the whole setup.",
]
SUMMARY = (
    "You looked Ada Lovelace up {n} times with crm_get_contact (email "
    + EMAIL
    + "): she is head of engineering at Analytical Engines Ltd, status customer, phone "
    "+44 20 7946 0958; her notes cover the maintenance contract renewal (quote by module, "
    "card reader upgrade before quarter end), the board's approval of a second engine "
    "(references, DPA, insurance needed; Charles signs above 50k) and card feeder jams caused "
    "by humidity (dehumidifier, firmware update, on-site visit next month). Nothing changed "
    "between lookups. Still to do: keep looking her up as instructed, then say you are done."
)


def responder(log_path: str) -> Any:
    """The fake model (serving from its own process): per run (the agent's model name ends with
    the run's lookups), the lookup until the run has sent that many requests, then the final
    answer; a summary to every summary request. Each request's size is appended to
    ``log_path``, one JSON line, for this process to read once the run ended."""
    lock = threading.Lock()
    calls: dict[str, int] = {}

    def respond(request: RecordedRequest) -> Step:
        size = int(request.headers.get("content-length") or len(json.dumps(request.body)))
        prompt_tokens = size // CHARS_PER_TOKEN
        summary = (request.system or "").startswith(SUMMARISER)
        with lock:
            model = request.model
            if summary:
                calls[f"{model}/summaries"] = n = calls.get(f"{model}/summaries", 0) + 1
                text = SUMMARY.format(n=calls.get(model, 0))
                reply = text_reply(text, input_tokens=prompt_tokens, output_tokens=len(text) // 4)
            else:
                calls[model] = n = calls.get(model, 0) + 1
                if n > int(model.rsplit("-", 1)[1]):
                    reply = text_reply("Done.", input_tokens=prompt_tokens, output_tokens=3)
                else:
                    reply = tool_call_reply(
                        "crm_get_contact", {"email": EMAIL}, input_tokens=prompt_tokens,
                        output_tokens=20,
                    )  # fmt: skip
            record = {
                "model": model,
                "summary": summary,
                "bytes": size,
                "prompt_tokens": prompt_tokens,
                "messages": len(request.messages),
            }
            with open(log_path, "a", encoding="utf-8") as log:
                log.write(json.dumps(record) + "\n")
        return reply

    return respond


def make_agent(server: Any, lookups: int, budget: int, prices: tuple[Decimal, Decimal]) -> Any:
    agent = common.make_agent(
        server,
        llm_model=f"cw-{uuid.uuid4().hex[:8]}-{lookups}",
        context_token_budget=budget,
        max_steps_per_run=lookups + 10,
        timeout_seconds=3600,
    )
    with tenancy.agency_context(agent.agency_id):
        contact = Contact.objects.create(
            agency_id=agent.agency_id,
            first_name="Ada",
            last_name="Lovelace",
            email=EMAIL,
            phone="+44 20 7946 0958",
            company="Analytical Engines Ltd",
            job_title="Head of Engineering",
            tags=["customer", "engineering", "renewal-q3", "decision-maker"],
            custom_fields={"account_tier": "gold", "region": "EMEA", "contract_ref": "AE-1843"},
        )
        for content in NOTES:
            Note.objects.create(agency_id=agent.agency_id, contact=contact, content=content)
        ModelPrice.objects.create(
            agency_id=agent.agency_id,
            provider="openai",
            model=agent.llm_model,
            input_per_mtok=prices[0],
            output_per_mtok=prices[1],
        )
    return agent


def read_log(log_path: str, model: str, expected: int, timeout: float = 10) -> list[dict[str, Any]]:
    """The run's request records (the fake server wrote them before answering each)."""
    deadline = time.monotonic() + timeout
    while True:
        with open(log_path, encoding="utf-8") as log:
            records = [json.loads(line) for line in log if f'"{model}"' in line]
        if len(records) >= expected or time.monotonic() > deadline:
            return records
        time.sleep(0.05)


def run_once(
    server: Any, log_path: str, lookups: int, budget: int, prices: tuple[Decimal, Decimal]
) -> dict[str, Any]:
    agent = make_agent(server, lookups, budget, prices)
    with tenancy.agency_context(agent.agency_id):
        started = time.perf_counter()
        created = execution_create(agent=agent, input=INSTRUCTION)
    assert created is not None
    execution = wait_for(created, timeout=1800)
    wall = time.perf_counter() - started
    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    with tenancy.agency_context(agent.agency_id):
        steps = execution.steps.aggregate(steps=Count("id"))["steps"]
        reflect = execution.steps.filter(step_type=StepType.REFLECT).aggregate(
            calls=Count("id"),
            tokens_input=Sum("tokens_input"),
            tokens_output=Sum("tokens_output"),
            cost_usd=Sum("cost_usd"),
        )
        usage = UsageDaily.objects.filter(agent_id=agent.id).aggregate(
            llm_calls=Sum("llm_calls"),
            tokens_input=Sum("tokens_input"),
            tokens_output=Sum("tokens_output"),
            cost_usd=Sum("cost_usd"),
        )
    records = read_log(log_path, agent.llm_model, execution.llm_call_count)
    calls = [r for r in records if not r["summary"]]
    summaries = [r for r in records if r["summary"]]
    sizes = [float(r["bytes"]) for r in calls]
    return {
        "budget_tokens": budget,
        "steps": steps,
        "tool_calls": execution.tool_call_count,
        "model_calls": len(calls),
        "request_bytes_p50": round(common.percentile(sizes, 50)),
        "request_bytes_max": round(max(sizes)),
        "request_bytes_last": round(sizes[-1]),
        "request_messages_max": max(r["messages"] for r in calls),
        "bytes_sent_total": sum(r["bytes"] for r in records),
        "bytes_sent_summary_requests": sum(r["bytes"] for r in summaries),
        "fake_provider_prompt_tokens": sum(r["prompt_tokens"] for r in records),
        "run_tokens_input": execution.tokens_input,
        "run_tokens_output": execution.tokens_output,
        "run_tokens_total": execution.tokens_total,
        "run_cost_usd": float(execution.cost_usd),
        "run_llm_call_count": execution.llm_call_count,
        "usage_daily": {
            key: float(value) if isinstance(value, Decimal) else value
            for key, value in usage.items()
        },
        "summary_calls": reflect["calls"],
        "summary_requests_seen": len(summaries),
        "summary_tokens_input": reflect["tokens_input"] or 0,
        "summary_tokens_output": reflect["tokens_output"] or 0,
        "summary_cost_usd": float(reflect["cost_usd"] or 0),
        "wall_s": round(wall, 2),
        "run_duration_s": round((execution.duration_ms or 0) / 1000, 2),
    }


def ratios(on: dict[str, Any], off: dict[str, Any]) -> dict[str, float]:
    keys = (
        "request_bytes_p50", "request_bytes_max", "request_bytes_last", "bytes_sent_total",
        "run_tokens_total", "run_cost_usd", "wall_s",
    )  # fmt: skip
    return {key: round(on[key] / off[key], 3) for key in keys if off[key]}


def table(results: list[dict[str, Any]]) -> str:
    rows = [
        ("budget (tokens)", lambda r: f"{r['budget_tokens']:,}" if r["budget_tokens"] else "off"),
        ("steps / model calls", lambda r: f"{r['steps']} / {r['run_llm_call_count']}"),
        ("request p50 KB", lambda r: f"{r['request_bytes_p50'] / 1000:.1f}"),
        ("request max KB", lambda r: f"{r['request_bytes_max'] / 1000:.1f}"),
        ("request last KB", lambda r: f"{r['request_bytes_last'] / 1000:.1f}"),
        ("sent in all MB", lambda r: f"{r['bytes_sent_total'] / 1e6:.2f}"),
        ("prompt tokens (provider)", lambda r: f"{r['fake_provider_prompt_tokens']:,}"),
        ("run tokens_total", lambda r: f"{r['run_tokens_total']:,}"),
        ("run cost USD", lambda r: f"{r['run_cost_usd']:.4f}"),
        ("usage_daily cost USD", lambda r: f"{r['usage_daily']['cost_usd']:.4f}"),
        ("summaries", lambda r: str(r["summary_calls"])),
        (
            "summary tokens in/out",
            lambda r: f"{r['summary_tokens_input']:,} / {r['summary_tokens_output']:,}",
        ),
        ("summary cost USD", lambda r: f"{r['summary_cost_usd']:.4f}"),
        ("wall s", lambda r: f"{r['wall_s']:.1f}"),
    ]
    width = max(len(name) for name, _ in rows)
    lines = []
    for name, cell in rows:
        lines.append(name.ljust(width) + "".join(cell(r).rjust(18) for r in results))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=500, help="think + act steps before the end")
    parser.add_argument("--budgets", default="32000,4000", help="context_token_budget values")
    parser.add_argument("--input-price", type=Decimal, default=Decimal("2.50"))
    parser.add_argument("--output-price", type=Decimal, default=Decimal("10.00"))
    parser.add_argument("--repeat", type=int, default=3, help="runs per setting (wall time)")
    args = parser.parse_args()
    lookups = args.steps // 2
    budgets = [0, *(int(b) for b in args.budgets.split(",") if b)]
    prices = (args.input_price, args.output_price)
    log_fd, log_path = tempfile.mkstemp(prefix="bench-context-window-", suffix=".jsonl")
    os.close(log_fd)
    common.create_database()
    results = []
    try:
        facts = common.machine_facts()
        worker = common.worker(concurrency=2).start()
        try:
            with common.FakeServerProcess(responder(log_path)) as server:
                run_once(server, log_path, 3, 0, prices)  # warm-up: imports, connections, caches
                runs: dict[int, list[dict[str, Any]]] = {budget: [] for budget in budgets}
                for _ in range(args.repeat):  # settings alternated: the machine drifts
                    for budget in budgets:
                        runs[budget].append(run_once(server, log_path, lookups, budget, prices))
        finally:
            worker.stop()
        for budget in budgets:
            # Bytes, tokens and cost of a setting's first run (the model's replies are the
            # same in every run: the lists show it); the wall time is the median of the runs.
            walls = [r["wall_s"] for r in runs[budget]]
            results.append(
                {
                    **runs[budget][0],
                    "wall_s": round(statistics.median(walls), 2),
                    "wall_s_runs": walls,
                    "bytes_sent_total_runs": [r["bytes_sent_total"] for r in runs[budget]],
                    "run_cost_usd_runs": [r["run_cost_usd"] for r in runs[budget]],
                }
            )
    finally:
        common.drop_database()
        os.unlink(log_path)
    off = results[0]
    report: dict[str, Any] = {
        "machine": facts.as_dict(),
        "cores": os.cpu_count(),
        "steps": args.steps,
        "tool_calls": lookups,
        "prices_usd_per_mtok": {"input": float(prices[0]), "output": float(prices[1])},
        "settings": results,
        "on_vs_off": {str(r["budget_tokens"]): ratios(r, off) for r in results[1:]},
    }
    print(facts.describe())
    print(table(results))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
