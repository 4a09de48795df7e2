"""The Celery application: configured from Django settings (``CELERY_*``), tasks autodiscovered."""

import os
from typing import Any

from celery import Celery
from celery.signals import (
    before_task_publish,
    worker_init,
    worker_process_init,
    worker_process_shutdown,
    worker_ready,
    worker_shutdown,
)

from config import queues

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.dev")

app = Celery("agentdesk")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# Every message sent by a process of the platform carries its send time: /metrics reads each
# queue's oldest waiting message's age from it (config/queues.py).
before_task_publish.connect(queues.stamp_sent_at, weak=False)


@worker_init.connect
def _load_the_llm_sdks(**_: Any) -> None:
    """Import the LLM SDKs when a worker starts (about a second of CPU each, Google's two; the
    web process loads them only if it needs them): not inside the first run that calls a model,
    whose time limit the import would eat and whose process it would stall, every other run's
    thread waiting on the import lock meanwhile. A prefork child inherits them."""
    import agents.llm.anthropic_provider  # noqa: PLC0415
    import agents.llm.google_provider  # noqa: PLC0415
    import agents.llm.openai_provider  # noqa: F401, PLC0415


# Worker heartbeats (ops/heartbeat.py), in every process that runs tasks: a prefork child, or
# the worker's own process with the threads pool (which sends no worker_process_init).
@worker_process_init.connect
def _heartbeat_in_pool_process(**_: Any) -> None:
    from ops import heartbeat  # noqa: PLC0415 - Django is set up once the worker runs

    heartbeat.start()


@worker_ready.connect
def _heartbeat_in_worker_process(sender: Any = None, **_: Any) -> None:
    from celery.concurrency.prefork import TaskPool as PreforkPool  # noqa: PLC0415

    from ops import heartbeat  # noqa: PLC0415

    if not isinstance(getattr(sender, "pool", None), PreforkPool):  # its children run tasks
        heartbeat.start()


@worker_process_shutdown.connect
@worker_shutdown.connect
def _heartbeat_stopped(**_: Any) -> None:
    """A clean shutdown (after the pool's tasks ended): the process's runs, if a cold shutdown
    left any, go on elsewhere at the reaper's next tick instead of after the timeout."""
    from ops import heartbeat  # noqa: PLC0415

    heartbeat.stop()
