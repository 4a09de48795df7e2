from django.apps import AppConfig


class UnderstandingConfig(AppConfig):
    name = "understanding"
    verbose_name = "Understanding phase"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # A wrong AGENTDESK_UNDERSTANDING_WEIGHTS stops the process at start, not a run later.
        from understanding import confidence  # noqa: PLC0415 - the settings are loaded now

        confidence.weights()
