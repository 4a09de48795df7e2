from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "agents"
    verbose_name = "Agents"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Celery's autodiscovery imports agents.tasks; the retention job lives beside its rules.
        from agents import retention  # noqa: F401, PLC0415
