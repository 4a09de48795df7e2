from __future__ import annotations

from django.urls import path, re_path

from webhooks.api.views import WebhookViewSet
from webhooks.outbound.api.views import DeliveryViewSet, SubscriptionViewSet
from webhooks.views import receive

_collection = WebhookViewSet.as_view({"get": "list", "post": "create"})
_item = WebhookViewSet.as_view({"get": "retrieve", "patch": "partial_update", "delete": "destroy"})
_rotate = WebhookViewSet.as_view({"post": "rotate"})
_subscriptions = SubscriptionViewSet.as_view({"get": "list", "post": "create"})
_subscription = SubscriptionViewSet.as_view(
    {"get": "retrieve", "patch": "partial_update", "delete": "destroy"}
)
_subscription_rotate = SubscriptionViewSet.as_view({"post": "rotate"})
_deliveries = DeliveryViewSet.as_view({"get": "list"})
_delivery = DeliveryViewSet.as_view({"get": "retrieve"})
_resend = DeliveryViewSet.as_view({"post": "resend"})
_OUT = "outbound-webhooks/"

urlpatterns = [
    # Deliveries (signed; no credential). With or without the trailing slash: a sender's POST
    # must not meet APPEND_SLASH's redirect.
    re_path(r"^webhooks/(?P<webhook_id>[^/]+)/?$", receive, name="webhook-receive"),
    path("agents/<str:agent_id>/webhooks/", _collection, name="agent-webhooks"),
    path("agents/<str:agent_id>/webhooks/<str:pk>/", _item, name="agent-webhook"),
    path("agents/<str:agent_id>/webhooks/<str:pk>/rotate/", _rotate, name="agent-webhook-rotate"),
    # Outbound webhooks (webhooks/outbound/).
    path(_OUT, _subscriptions, name="outbound-webhooks"),
    path(_OUT + "<str:pk>/", _subscription, name="outbound-webhook"),
    path(_OUT + "<str:pk>/rotate/", _subscription_rotate, name="outbound-webhook-rotate"),
    path(_OUT + "<str:subscription_id>/deliveries/", _deliveries, name="outbound-deliveries"),
    path(_OUT + "<str:subscription_id>/deliveries/<str:pk>/", _delivery, name="outbound-delivery"),
    path(
        _OUT + "<str:subscription_id>/deliveries/<str:pk>/resend/",
        _resend,
        name="outbound-delivery-resend",
    ),
]
