"""The client address a request counts against in login and API-key throttling."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.http import HttpRequest

if TYPE_CHECKING:
    from rest_framework.request import Request


def client_address(request: HttpRequest | Request) -> str | None:
    """``REMOTE_ADDR``, never a header the client writes itself (``X-Forwarded-For`` would let it
    choose a fresh address per guess). Behind a reverse proxy, the ASGI server puts the proxy's
    ``X-Forwarded-For`` there for the proxies it trusts (uvicorn's ``--forwarded-allow-ips``,
    127.0.0.1 by default): configured once, there, for everything that reads the address."""
    return request.META.get("REMOTE_ADDR") or None  # None: no socket (a test's bare request)
