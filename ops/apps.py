from django.apps import AppConfig


class OpsConfig(AppConfig):
    """Operations: worker heartbeats (dead-worker detection), metrics and tracing set-up."""

    name = "ops"
    default_auto_field = "django.db.models.BigAutoField"
