"""``GET /metrics``'s body: the samples every process wrote (summed over processes by
prometheus-client's multiprocess collector) and the gauges computed when it is read.

Computed at scrape time, each with its own short deadline so that a scrape never waits on a
dependency that is down — what cannot be read is left out of that scrape, and
``agentdesk_scrape_source_up{source}`` says so:

- approvals and questions waiting for a person, and the age of the oldest (two indexed
  aggregates over the pending rows of every agency, on the runtime role with the platform
  context: row-level security lets nothing else through);
- each Celery queue's depth and the age of its oldest waiting message (ops.metrics.queues: one
  pipelined Redis round trip);
- the database pool of the web process answering the scrape: its connections in use and idle,
  its limit, the requests waiting for one (read from the pool itself, no query).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Count, Min
from django.utils import timezone
from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import choose_encoder
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from ops.metrics import multiprocess, queues

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Waiting:
    count: int
    oldest_age_seconds: float


def render(accept: str = "") -> tuple[bytes, str]:
    """The scrape's body and content type: the Prometheus text format, or OpenMetrics when the
    scraper's ``Accept`` asks for it (the client library's own negotiation)."""
    registry = CollectorRegistry(auto_describe=False)
    path = multiprocess.directory()
    path.mkdir(parents=True, exist_ok=True)  # no process has recorded anything yet
    # Processes of this host killed since (SIGKILL, or a server that re-raises SIGTERM and so
    # skips atexit) no longer count in the live gauges.
    multiprocess.sweep_dead_processes(path)
    MultiProcessCollector(registry, path=str(path))
    registry.register(ScrapeTimeCollector())
    encoder, content_type = choose_encoder(accept)
    return encoder(registry), content_type


class ScrapeTimeCollector(Collector):
    def collect(self) -> Iterator[GaugeMetricFamily]:
        results = _read_all(
            {"database": _waiting_for_people, "redis": queues.read},
            timeout=settings.AGENTDESK_METRICS_QUERY_TIMEOUT_SECONDS,
        )
        up = GaugeMetricFamily(
            "agentdesk_scrape_source_up",
            "Whether this scrape could read the source of its scrape-time gauges (1) or left "
            "them out (0).",
            labels=["source"],
        )
        for source, value in results.items():
            up.add_metric([source], 0 if value is None else 1)
        yield up
        people = results["database"]
        if people is not None:
            yield from _people_families(people)
        yield from _pool_families()
        if results["redis"] is not None:
            yield from _queue_families(results["redis"])


def _queue_families(states: dict[str, queues.QueueState]) -> Iterator[GaugeMetricFamily]:
    depth = GaugeMetricFamily(
        "agentdesk_queue_depth",
        'Messages waiting in each Celery queue for a worker (README "Queues").',
        labels=["queue"],
    )
    age = GaugeMetricFamily(
        "agentdesk_queue_oldest_age_seconds",
        "Seconds since the oldest message waiting in each Celery queue was sent (0 when none "
        "waits).",
        labels=["queue"],
    )
    for queue, state in states.items():
        depth.add_metric([queue], state.depth)
        if state.oldest_age_seconds is not None:
            age.add_metric([queue], state.oldest_age_seconds)
    yield depth
    yield age


def _people_families(people: dict[str, Waiting]) -> Iterator[GaugeMetricFamily]:
    for name, what in (("approvals", "Approvals"), ("questions", "Questions")):
        waiting = people[name]
        yield GaugeMetricFamily(
            f"agentdesk_{name}_waiting",
            f"{what} waiting for a person now (every agency).",
            value=waiting.count,
        )
        yield GaugeMetricFamily(
            f"agentdesk_{name}_waiting_oldest_age_seconds",
            f"Age of the oldest of the {name} waiting now (0 when none waits).",
            value=waiting.oldest_age_seconds,
        )


def _pool_families() -> Iterator[GaugeMetricFamily]:
    """The database pool of the web process answering the scrape (after the scrape's own query
    gave its connection back): nothing when it has not opened one yet."""
    from core import database  # noqa: PLC0415

    stats = database.pool_stats()
    if stats is None:
        return
    available = stats.get("pool_available", 0)
    connections = GaugeMetricFamily(
        "agentdesk_db_pool_connections",
        "Database connections of the answering web process's pool: held by a request, a socket "
        "or a thread (in_use), or idle in the pool.",
        labels=["state"],
    )
    connections.add_metric(["in_use"], stats.get("pool_size", 0) - available)
    connections.add_metric(["idle"], available)
    yield connections
    yield GaugeMetricFamily(
        "agentdesk_db_pool_max_connections",
        "The most connections the answering web process's pool may open (DATABASE_POOL_MAX_SIZE).",
        value=stats.get("pool_max", 0),
    )
    yield GaugeMetricFamily(
        "agentdesk_db_pool_requests_waiting",
        "Requests of the answering web process waiting for a pooled connection now.",
        value=stats.get("requests_waiting", 0),
    )


def _read_all(readers: dict[str, Callable[[], Any]], *, timeout: float) -> dict[str, Any | None]:
    """Every reader at once; ``None`` for one that failed or did not answer within ``timeout``
    (its thread ends in the background, bounded by its own timeouts)."""
    pool = ThreadPoolExecutor(max_workers=len(readers), thread_name_prefix="metrics-scrape")
    try:
        futures = {name: pool.submit(reader) for name, reader in readers.items()}
        wait(futures.values(), timeout=timeout)
        results: dict[str, Any | None] = {}
        for name, future in futures.items():
            if not future.done():
                logger.warning("metrics: %s did not answer within %s s; left out", name, timeout)
                results[name] = None
            elif (error := future.exception()) is not None:
                logger.warning(
                    "metrics: %s unavailable (%s: %s); left out", name, type(error).__name__, error
                )
                results[name] = None
            else:
                results[name] = future.result()
        return results
    finally:
        pool.shutdown(wait=False)


def _waiting_for_people() -> dict[str, Waiting]:
    from approvals.models import Approval, ApprovalStatus, Question, QuestionStatus  # noqa: PLC0415
    from core import tenancy  # noqa: PLC0415

    now = timezone.now()
    try:
        with tenancy.platform_context():
            approvals = Approval.objects.filter(status=ApprovalStatus.PENDING).aggregate(
                n=Count("id"), oldest=Min("created_at")
            )
            questions = Question.objects.filter(status=QuestionStatus.PENDING).aggregate(
                n=Count("id"), oldest=Min("created_at")
            )
    finally:
        connection.close()  # this thread's: back to the pool
    return {
        name: Waiting(
            count=row["n"],
            oldest_age_seconds=max(0.0, (now - row["oldest"]).total_seconds())
            if row["oldest"]
            else 0.0,
        )
        for name, row in (("approvals", approvals), ("questions", questions))
    }
