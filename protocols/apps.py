from django.apps import AppConfig


class ProtocolsConfig(AppConfig):
    name = "protocols"
    verbose_name = "Protocols (MCP, A2A)"
    default_auto_field = "django.db.models.BigAutoField"
