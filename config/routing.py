"""Websocket routes; each app that pushes live updates adds its consumers here."""

from django.urls import URLPattern

from live.routing import websocket_urlpatterns as live_routes

websocket_urlpatterns: list[URLPattern] = [*live_routes]
