from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "core"
    verbose_name = "Agencies and access"

    def ready(self) -> None:
        # API keys' admin lives in its own module (core/admin.py is the tenancy admin).
        from core import admin_api_keys  # noqa: F401, PLC0415
