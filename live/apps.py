from django.apps import AppConfig
from django.contrib.auth.signals import user_logged_out
from django.db.models.signals import post_save


class LiveConfig(AppConfig):
    """What people see happen: websockets (one execution, one agency's dashboard), the event
    protocol they speak, and the staff home. The runtime only publishes (core.realtime)."""

    name = "live"
    verbose_name = "Live view"

    def ready(self) -> None:
        # Models are importable only once the apps are loaded, that is here.
        from core.models import Agency, User  # noqa: PLC0415 - apps loaded
        from live.auth import agency_saved, login_saved, session_logged_out  # noqa: PLC0415

        # Django's one hook into every logout (the admin's, any other view's): the sockets the
        # session opened are closed. It only publishes; nothing is written.
        user_logged_out.connect(session_logged_out, dispatch_uid="live.session_logged_out")
        # A login or an agency saved (deactivated, a password changed: the admin's forms, the
        # shell, any service): the sockets they opened read their credential again at once.
        post_save.connect(login_saved, sender=User, dispatch_uid="live.login_saved")
        post_save.connect(agency_saved, sender=Agency, dispatch_uid="live.agency_saved")
