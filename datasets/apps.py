from django.apps import AppConfig


class DatasetsConfig(AppConfig):
    name = "datasets"
    verbose_name = "Analysis datasets"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The retention job, for Celery's registry (no tasks module to autodiscover).
        from datasets import retention  # noqa: F401, PLC0415
