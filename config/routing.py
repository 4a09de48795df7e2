"""Websocket routes; each app that pushes live updates adds its consumers here."""

from django.urls import URLPattern

websocket_urlpatterns: list[URLPattern] = []
