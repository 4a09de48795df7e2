"""ASGI entry point: HTTP through Django, websockets through Channels (authenticated sessions)."""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.dev")
# A web request waits at most this long for a pooled connection (a worker, 30 s): when the
# database is down, a page or an API call answers 503 in seconds instead of hanging.
os.environ.setdefault("DATABASE_POOL_TIMEOUT", "5")
# ...and a pooled connection is tested before a request uses it: after a database restart no
# request fails on a connection that died with the old server.
os.environ.setdefault("DATABASE_POOL_CHECK", "true")
# ...and once the database is back, pages answer within seconds, not after the pool's backoff.
os.environ.setdefault("DATABASE_POOL_RECONNECT_TIMEOUT", "4")

# Django must be set up before anything imports models (consumers do).
django.setup(set_prefix=False)  # as django.core.asgi.get_asgi_application does

from core.asgi import ASGIHandler, IsolatedContext  # noqa: E402 - after setup (Django's handler)

django_asgi_app = ASGIHandler()

from django.urls import get_resolver  # noqa: E402

# The URLs, and with them the admin's modules (config/urls.py), before the first request or
# socket: its pages' panels are registered there, and no request waits for them.
get_resolver().urlconf_module  # noqa: B018 - loaded for its side effect

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from config.routing import websocket_urlpatterns  # noqa: E402
from live.security import SameSiteOriginValidator  # noqa: E402
from protocols.a2a.asgi import with_a2a  # noqa: E402
from protocols.mcp.asgi import McpEndpoint  # noqa: E402
from webhooks.asgi import WebhookBodyLimit  # noqa: E402

# Each request and socket in a context of its own, never one inherited from the request before
# it on the same connection: Django would run it on that request's thread and leak a pooled
# database connection (core/asgi.py).
application = IsolatedContext(
    ProtocolTypeRouter(
        {
            # Webhook bodies are cut off past their limit before Django reads them
            # (webhooks/asgi.py); /a2a/ goes to the A2A endpoints (protocols/a2a/asgi.py).
            # /mcp is the MCP server (protocols/mcp/asgi.py).
            "http": McpEndpoint(with_a2a(WebhookBodyLimit(django_asgi_app))),
            "websocket": SameSiteOriginValidator(
                AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
            ),
        }
    )
)
