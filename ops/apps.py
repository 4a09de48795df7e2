from django.apps import AppConfig

from ops import memory_dump


class OpsConfig(AppConfig):
    """Operations: worker heartbeats (dead-worker detection), metrics and tracing set-up."""

    name = "ops"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from core.database import pool_replaced  # noqa: PLC0415 - apps loaded
        from ops.metrics import recording  # noqa: PLC0415 - imports the settings' metrics

        pool_replaced.connect(recording.db_pool_replaced, dispatch_uid="ops.db_pool_replaced")
        memory_dump.install()  # a debugging aid: only with AGENTDESK_MEMORY_DUMP_DIR set
