from __future__ import annotations

from django.urls import path, re_path

from webhooks.api.views import WebhookViewSet
from webhooks.views import receive

_collection = WebhookViewSet.as_view({"get": "list", "post": "create"})
_item = WebhookViewSet.as_view({"get": "retrieve", "patch": "partial_update", "delete": "destroy"})
_rotate = WebhookViewSet.as_view({"post": "rotate"})

urlpatterns = [
    # Deliveries (signed; no credential). With or without the trailing slash: a sender's POST
    # must not meet APPEND_SLASH's redirect.
    re_path(r"^webhooks/(?P<webhook_id>[^/]+)/?$", receive, name="webhook-receive"),
    path("agents/<str:agent_id>/webhooks/", _collection, name="agent-webhooks"),
    path("agents/<str:agent_id>/webhooks/<str:pk>/", _item, name="agent-webhook"),
    path("agents/<str:agent_id>/webhooks/<str:pk>/rotate/", _rotate, name="agent-webhook-rotate"),
]
