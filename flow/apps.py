from django.apps import AppConfig


class FlowConfig(AppConfig):
    name = "flow"
    verbose_name = "Flow analysis"
    default_auto_field = "django.db.models.BigAutoField"
