from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "memory"
    verbose_name = "Memory"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Celery's autodiscovery imports memory.tasks; these jobs live beside their rules.
        from memory import consolidation, conversations, episodes, retention  # noqa: F401, PLC0415
