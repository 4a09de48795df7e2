from django.apps import AppConfig

from ops import memory_dump


class OpsConfig(AppConfig):
    """Operations: worker heartbeats (dead-worker detection), metrics and tracing set-up."""

    name = "ops"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        memory_dump.install()  # a debugging aid: only with AGENTDESK_MEMORY_DUMP_DIR set
