"""Celery's process signals for the metrics' multiprocess files (connected on import, by
:mod:`ops.metrics.recording` when metrics are on; the worker imports it with its tasks).

A prefork pool process leaves with ``os._exit``, which skips atexit: its live gauges are given
back on ``worker_process_shutdown``. The worker's main process (the thread pool's only process)
does so on ``worker_shutdown``; atexit covers it too, and web and beat.

With ``AGENTDESK_METRICS_PORT`` set, a worker (once ready) and beat serve their own directory's
samples on that port (:mod:`ops.metrics.pod_server`: pods that share no directory with a web).
"""

from __future__ import annotations

from typing import Any

from celery.signals import beat_init, worker_process_shutdown, worker_ready, worker_shutdown

from ops.metrics import multiprocess, pod_server


@worker_process_shutdown.connect(weak=False)
def _pool_process_exits(pid: int | None = None, **_: Any) -> None:
    multiprocess.mark_dead()


@worker_shutdown.connect(weak=False)
def _worker_exits(**_: Any) -> None:
    multiprocess.mark_dead()


@worker_ready.connect(weak=False)
def _worker_serves_metrics(**_: Any) -> None:
    pod_server.start()


@beat_init.connect(weak=False)
def _beat_serves_metrics(**_: Any) -> None:
    pod_server.start()
