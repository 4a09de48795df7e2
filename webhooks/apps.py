from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    name = "webhooks"
    verbose_name = "Webhooks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The retention task, for Celery's registry (no tasks module to autodiscover).
        from webhooks import retention  # noqa: F401, PLC0415
