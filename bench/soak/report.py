"""The soak's figures from what its parts left: Locust's statistics (CSV), the users' tally, the
samples, the platform's log; as a dict (report.json) and as Markdown (report.md)."""

from __future__ import annotations

import csv
import math
import re
import statistics
from pathlib import Path
from typing import Any

from bench.soak.sampling import Sample

REPLACED = "replacing it"  # core.database's warning when it replaces a stalled pool
RETURNED_IN_TRANSACTION = "rolling back returned connection"  # psycopg_pool's warning
ANSWERED = re.compile(r'"(GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS) ([^ ?]*)[^"]*" (5\d\d)')
DJANGO_5XX = re.compile(r"ERROR django\.request: ([^:]+): (\S+)")


def locust_rows(stats_csv: Path) -> list[dict[str, Any]]:
    rows = []
    with stats_csv.open() as handle:
        for row in csv.DictReader(handle):
            rows.append(
                {
                    "type": row["Type"],
                    "name": row["Name"],
                    "requests": int(row["Request Count"]),
                    "failures": int(row["Failure Count"]),
                    "rps": float(row["Requests/s"]),
                    "p50_ms": _number(row["50%"]),
                    "p95_ms": _number(row["95%"]),
                    "p99_ms": _number(row["99%"]),
                    "max_ms": _number(row["Max Response Time"]),
                }
            )
    return rows


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


def server_errors(tally: dict[str, int], web_log: list[str]) -> dict[str, dict[str, int]]:
    """Answers 500 and above: those the clients received (HTTP requests and websocket handshakes,
    by name and status), those the ASGI server's access log shows, and those Django logged
    (``django.request`` errors: they include requests whose client had left, which no client
    and no access line sees), with unhandled exceptions in the ASGI application."""
    received = {}
    for key, count in tally.items():
        status = key.rsplit(" ", 1)[-1]
        if key.startswith(("http ", "ws ")) and status.isdigit() and int(status) >= 500:
            received[key] = count
    answered: dict[str, int] = {}
    logged: dict[str, int] = {}
    for line in web_log:
        if found := ANSWERED.search(line):
            key = f"{found[1]} {_shape(found[2])} {found[3]}"
            answered[key] = answered.get(key, 0) + 1
        if found := DJANGO_5XX.search(line):
            key = f"{_shape(found[2])} {found[1]}"
            logged[key] = logged.get(key, 0) + 1
        if "Exception in ASGI application" in line:
            logged["ASGI application exception"] = logged.get("ASGI application exception", 0) + 1
    return {"received": received, "access_log": answered, "django_logged": logged}


def _shape(path: str) -> str:
    return re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "[id]", path)


def server_error_count(errors: dict[str, dict[str, int]]) -> int:
    return sum(sum(group.values()) for group in errors.values())


def pool_replacements(web_log: list[str], last: Sample | None) -> dict[str, Any]:
    logged = [line for line in web_log if REPLACED in line]
    counted = {k: v for k, v in (last.pool if last else {}).items() if "replace" in k}
    returned = [line for line in web_log if RETURNED_IN_TRANSACTION in line]
    return {
        "logged": len(logged),
        "lines": logged[:20],
        "metric": counted,
        "returned_in_transaction": len(returned),
    }


def connection_series(samples: list[Sample]) -> list[dict[str, Any]]:
    series = []
    for sample in samples:
        point: dict[str, Any] = {"t": sample.at}
        for group in ("web", "worker", "beat", "other"):
            states: dict[str, int] = dict(sample.connections.get(group, {}))
            point[group] = {"total": sum(states.values()), **dict(states)}
        point["pool"] = sample.pool
        point["rss_mb"] = sample.rss_mb
        series.append(point)
    return series


def per_minute(series: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The connection series by minute of the soak: the most and the median of each figure, the
    memory at the minute's last sample."""
    minutes: dict[int, list[dict[str, Any]]] = {}
    for point in series:
        minutes.setdefault(int(point["t"] // 60), []).append(point)
    rows = []
    for minute, points in sorted(minutes.items()):
        in_use = [p["pool"].get('agentdesk_db_pool_connections{state="in_use"}') for p in points]
        in_use_known = [v for v in in_use if v is not None]
        rows.append(
            {
                "minute": minute,
                "samples": len(points),
                "pool_in_use_max": max(in_use_known, default=math.nan),
                "pool_in_use_median": statistics.median(in_use_known) if in_use_known else math.nan,
                "pool_waiting_max": max(
                    (p["pool"].get("agentdesk_db_pool_requests_waiting", 0) for p in points),
                    default=0,
                ),
                "web_connections_max": max(p["web"]["total"] for p in points),
                "web_idle_in_transaction_max": max(
                    p["web"].get("idle in transaction", 0) for p in points
                ),
                "worker_connections_max": max(p["worker"]["total"] for p in points),
                "web_rss_mb": points[-1]["rss_mb"].get("web"),
                "worker_rss_mb": points[-1]["rss_mb"].get("worker"),
            }
        )
    return rows


# What warm-up waits for besides its minimum time: each served once (code paths, templates and
# caches of the web process first used; on a busy machine a staff tour takes minutes).
WARMUP_NAMES = (
    "run page", "home", "inbox", "agent page", "API docs", "API schema (the docs page loads it)",
    "approval page", "/api/v1/agents/[id]/execute/", "/api/v1/executions/[id]/",
    "/api/v1/webhooks/[id]/", "/ws/agency/ (handshake)", "/ws/executions/[id]/ (page) (handshake)",
    "/ws/executions/[id]/ (watcher) (handshake)",
)  # fmt: skip


def rss_growth(
    samples: list[Sample], *, warmup: float, first_seen: dict[str, float]
) -> dict[str, Any]:
    """Resident memory of web and worker at the first sample after warm-up (``warmup`` seconds
    and every one of :data:`WARMUP_NAMES` answered once) and at the end."""
    if not samples:
        return {}
    served = [first_seen[name] for name in WARMUP_NAMES if name in first_seen]
    all_served = max(served) if len(served) == len(WARMUP_NAMES) else math.inf
    warm = next((s for s in samples if s.at >= warmup and s.wall >= all_served), samples[-1])
    end = samples[-1]
    growth = {}
    for name in ("web", "worker"):
        before, after = warm.rss_mb.get(name, math.nan), end.rss_mb.get(name, math.nan)
        growth[name] = {
            "after_warmup_mb": before,
            "at_end_mb": after,
            "growth_pct": round((after - before) * 100 / before, 1) if before else math.nan,
        }
    missing = [name for name in WARMUP_NAMES if name not in first_seen]
    return {"warmup_at_s": warm.at, "not_served": missing, "end_at_s": end.at, **growth}


def markdown(report: dict[str, Any]) -> str:
    lines = [
        f"Soak of {report['seconds']:.0f} s, users {report['users']}, "
        f"{report['requests_per_second']:.1f} requests/s in all.",
        "",
        f"Machine: {report['machine']['describe']}",
        "",
        "| type | name | requests | failures | req/s | p50 ms | p95 ms | p99 ms | max ms |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in report["requests"]:
        lines.append(
            f"| {row['type']} | {row['name']} | {row['requests']} | {row['failures']} | "
            f"{row['rps']:.2f} | {row['p50_ms']:.0f} | {row['p95_ms']:.0f} | {row['p99_ms']:.0f} |"
            f" {row['max_ms']:.0f} |"
        )
    lines += [
        "",
        f"5xx: {report.get('server_error_count', 0)} {report['server_errors']}",
        f"pool replacements: {report['pool_replacements']['logged']} logged, "
        f"metric {report['pool_replacements']['metric'] or 'not served'}; connections "
        f"returned to the pool inside a transaction (psycopg_pool rolled them back): "
        f"{report['pool_replacements']['returned_in_transaction']}",
        f"RSS: {report['rss']}",
        f"runs ended (as API clients saw them): {report['runs']}",
        f"other answers: {report['statuses']}",
        "",
        "| minute | samples | pool in use, max / median (of 32) | requests waiting, max | web "
        "connections, max (idle in transaction, max) | worker connections, max | web RSS MB | "
        "worker RSS MB |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in per_minute(report["connections"]):
        lines.append(
            f"| {row['minute']} | {row['samples']} | {row['pool_in_use_max']:g} / "
            f"{row['pool_in_use_median']:g} | {row['pool_waiting_max']:g} | "
            f"{row['web_connections_max']} ({row['web_idle_in_transaction_max']}) | "
            f"{row['worker_connections_max']} | {row['web_rss_mb']} | {row['worker_rss_mb']} |"
        )
    return "\n".join(lines) + "\n"
