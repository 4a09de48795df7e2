"""The websocket handshake's origin check."""

from __future__ import annotations

from typing import Any
from urllib.parse import ParseResult

from channels.security.websocket import OriginValidator
from django.conf import settings


class SameSiteOriginValidator(OriginValidator):
    """Refuses a handshake from a page of another site (cross-site websocket hijacking with the
    admin's session cookie). A browser always sends ``Origin``; it must name one of
    ``ALLOWED_HOSTS`` (or ``CSRF_TRUSTED_ORIGINS``). A client that sends none is not a browser
    page and is let through to authentication, as Channels' own validator would not: API
    clients authenticate with a key and rarely set the header."""

    def __init__(self, application: Any) -> None:
        super().__init__(application, [*settings.ALLOWED_HOSTS, *settings.CSRF_TRUSTED_ORIGINS])

    def valid_origin(self, parsed_origin: ParseResult | None) -> bool:
        if parsed_origin is None:
            return True
        return bool(self.validate_origin(parsed_origin))
