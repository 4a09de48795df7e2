"""The Celery application: configured from Django settings (``CELERY_*``), tasks autodiscovered."""

import os
from typing import Any

from celery import Celery
from celery.signals import worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")

app = Celery("agentdesk")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_init.connect
def _load_the_llm_sdks(**_: Any) -> None:
    """Import both LLM SDKs when a worker starts (about a second of CPU each; the web process
    loads them only if it needs them): not inside the first run that calls a model, whose time
    limit the import would eat and whose process it would stall, every other run's thread
    waiting on the import lock meanwhile. A prefork child inherits them."""
    import agents.llm.anthropic_provider  # noqa: PLC0415
    import agents.llm.openai_provider  # noqa: F401, PLC0415
