from django.apps import AppConfig


class LiveConfig(AppConfig):
    """What people see happen: websockets (one execution, one agency's dashboard), the event
    protocol they speak, and the staff home. The runtime only publishes (core.realtime)."""

    name = "live"
    verbose_name = "Live view"

    def ready(self) -> None:
        from django.contrib.auth.signals import user_logged_out  # noqa: PLC0415 - apps loaded

        from live.auth import session_logged_out  # noqa: PLC0415 - imports models

        # Django's one hook into every logout (the admin's, any other view's): the sockets the
        # session opened are closed. It only publishes; nothing is written.
        user_logged_out.connect(session_logged_out, dispatch_uid="live.session_logged_out")
