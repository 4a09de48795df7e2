from django.apps import AppConfig


class LiveConfig(AppConfig):
    """What people see happen: websockets (one execution, one agency's dashboard), the event
    protocol they speak, and the staff home. The runtime only publishes (core.realtime)."""

    name = "live"
    verbose_name = "Live view"
