"""An agency's outbound webhooks: list, create (the secret shown once), change, rotate the secret,
delete; each one's deliveries with their attempts, and a delivery sent again. Agency admins and
staff only, reads included (a subscription's URL may carry a receiver's token)."""

from __future__ import annotations

from typing import Any

from django.db.models import Prefetch
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    extend_schema,
    extend_schema_view,
)
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from core.api.base import TenantViewSet, parse_id
from core.api.permissions import WRITE_ROLES
from core.selectors import access_object
from webhooks.outbound.api.serializers import (
    DeliverySerializer,
    SubscriptionCreateSerializer,
    SubscriptionRotateSerializer,
    SubscriptionSecretSerializer,
    SubscriptionSerializer,
    SubscriptionUpdateSerializer,
)
from webhooks.outbound.models import Delivery, DeliveryAttempt, Subscription
from webhooks.outbound.services import (
    delivery_resend,
    subscription_create,
    subscription_delete,
    subscription_rotate,
    subscription_update,
)

SUBSCRIPTION_ID = OpenApiParameter("subscription_id", OpenApiTypes.UUID, OpenApiParameter.PATH)
_EXAMPLE = {
    "name": "Ops channel",
    "url": "https://hooks.example.com/agentdesk",
    "event_types": ["ai.execution.failed", "ai.approval.*"],
}


@extend_schema_view(
    list=extend_schema(
        operation_id="outbound_webhooks_list", summary="The agency's outbound webhooks"
    ),
    retrieve=extend_schema(
        operation_id="outbound_webhooks_retrieve", summary="One outbound webhook"
    ),
    destroy=extend_schema(
        operation_id="outbound_webhooks_destroy",
        summary="Delete an outbound webhook",
        description="Its deliveries and their attempts go with it.",
    ),
)
class SubscriptionViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin, TenantViewSet
):
    serializer_class = SubscriptionSerializer
    ordering_fields = ["name", "created_at"]
    ordering = ["name"]
    read_roles = WRITE_ROLES
    write_roles = WRITE_ROLES
    filterset_class = None

    def get_queryset(self) -> Any:
        return self.scope(Subscription.objects.all())

    def _with_secret(self, subscription: Subscription, secret: str, code: int) -> Response:
        serializer = SubscriptionSecretSerializer(subscription, context={"secret": secret})
        return Response(serializer.data, code)

    @extend_schema(
        operation_id="outbound_webhooks_create",
        summary="Subscribe a URL to events",
        description=(
            "Answers with the signing `secret` (whsec_...), shown in this response only. "
            'Deliveries are signed as Standard Webhooks says (README "Outbound webhooks"). '
            "A URL or an event type of the wrong form is a 400; one that cannot be used (a "
            "host with a private address or that does not resolve, http:// outside development, "
            "an ai.* name the platform does not emit) a 422 naming why."
        ),
        request=SubscriptionCreateSerializer,
        responses={201: SubscriptionSecretSerializer},
        examples=[OpenApiExample("Create", value=_EXAMPLE, request_only=True)],
    )
    def create(self, request: Request) -> Response:
        body = SubscriptionCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        assert self.principal.agency_id is not None  # RolePermission: writes have an agency
        subscription, secret = subscription_create(
            agency_id=self.principal.agency_id,
            created_by_id=self.principal.user_id,
            **body.validated_data,
        )
        return self._with_secret(subscription, secret, status.HTTP_201_CREATED)

    @extend_schema(
        operation_id="outbound_webhooks_partial_update",
        summary="Change an outbound webhook, or activate it again",
        request=SubscriptionUpdateSerializer,
        responses={200: SubscriptionSerializer},
    )
    def partial_update(self, request: Request, pk: str | None = None) -> Response:
        subscription = self.get_object()
        body = SubscriptionUpdateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        subscription = subscription_update(subscription=subscription, **body.validated_data)
        return Response(SubscriptionSerializer(subscription).data)

    def perform_destroy(self, instance: Subscription) -> None:
        subscription_delete(subscription=instance)

    @extend_schema(
        operation_id="outbound_webhooks_rotate",
        summary="Rotate an outbound webhook's secret",
        description=(
            "Answers with the new `secret` (shown this once). For `overlap_seconds` deliveries "
            "carry a signature with the previous secret too (space-separated in "
            "`webhook-signature`), so the receiver can switch without refusing any."
        ),
        request=SubscriptionRotateSerializer,
        responses={200: SubscriptionSecretSerializer},
    )
    @action(detail=True, methods=["post"])
    def rotate(self, request: Request, pk: str | None = None) -> Response:
        subscription = self.get_object()
        body = SubscriptionRotateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        subscription, secret = subscription_rotate(
            subscription=subscription, overlap_seconds=body.validated_data.get("overlap_seconds")
        )
        return self._with_secret(subscription, secret, status.HTTP_200_OK)


class DeliveryViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantViewSet):
    serializer_class = DeliverySerializer
    ordering_fields = ["created_at"]
    ordering = ["-created_at"]
    read_roles = WRITE_ROLES
    write_roles = WRITE_ROLES
    filterset_class = None

    def subscription(self) -> Subscription:
        subscriptions = self.scope(Subscription.objects.all())
        return access_object(
            subscriptions, agency=None, id=parse_id(self.kwargs["subscription_id"])
        )

    def get_queryset(self) -> Any:
        if getattr(self, "swagger_fake_view", False):  # schema generation: no request
            return Delivery.objects.none()
        attempts = Prefetch("attempt_log", DeliveryAttempt.objects.order_by("number"))
        deliveries = Delivery.objects.filter(subscription=self.subscription())
        return self.scope(deliveries).prefetch_related(attempts)

    @extend_schema(
        operation_id="outbound_webhook_deliveries_list",
        summary="An outbound webhook's deliveries, newest first, with their attempts",
        parameters=[SUBSCRIPTION_ID],
    )
    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().list(request, *args, **kwargs)

    @extend_schema(
        operation_id="outbound_webhook_deliveries_retrieve",
        summary="One delivery and its attempts",
        parameters=[SUBSCRIPTION_ID],
    )
    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().retrieve(request, *args, **kwargs)

    @extend_schema(
        operation_id="outbound_webhook_deliveries_resend",
        summary="Send a delivery again",
        description=(
            "One attempt now, on the notify queue, with the same body and webhook-id; it is "
            "logged as manual. A pending delivery keeps its retries. 400 "
            "(`subscription_inactive`) while the webhook is disabled."
        ),
        parameters=[SUBSCRIPTION_ID],
        request=None,
        responses={202: DeliverySerializer},
    )
    @action(detail=True, methods=["post"])
    def resend(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        self.expect_no_body(request)
        delivery = self.get_object()
        delivery_resend(delivery=delivery)
        return Response(DeliverySerializer(delivery).data, status.HTTP_202_ACCEPTED)
