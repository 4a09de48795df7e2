from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "audit"
    verbose_name = "Audit log"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The audited models' signal receivers, the login receivers and the retention task.
        from audit import receivers, retention  # noqa: F401, PLC0415

        receivers.connect()
