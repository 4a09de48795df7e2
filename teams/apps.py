from django.apps import AppConfig


class TeamsConfig(AppConfig):
    """No models of its own: delegation uses agents' Execution.parent and AgentMessage."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "teams"
    verbose_name = "Teams of agents"
