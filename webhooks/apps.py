from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    name = "webhooks"
    verbose_name = "Webhooks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The tasks, for Celery's registry (no tasks module to autodiscover).
        from core import notices  # noqa: PLC0415
        from webhooks import retention  # noqa: F401, PLC0415
        from webhooks.outbound import tasks  # noqa: F401, PLC0415
        from webhooks.outbound.notices import disabled_subscriptions  # noqa: PLC0415

        notices.register("webhooks.disabled", disabled_subscriptions)
