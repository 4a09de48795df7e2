"""An agent's inbound webhooks: list, create (the secret shown once), change, rotate the secret,
delete. Agency admins and staff only, reads included: a webhook's URL is half of what a sender
needs. Receiving deliveries: webhooks/views.py."""

from __future__ import annotations

from typing import Any

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

from agents.models import Agent
from core.api.base import TenantViewSet, parse_id
from core.api.permissions import WRITE_ROLES
from core.selectors import access_object
from webhooks.api.serializers import (
    WebhookCreateSerializer,
    WebhookRotateSerializer,
    WebhookSecretSerializer,
    WebhookSerializer,
    WebhookUpdateSerializer,
)
from webhooks.models import Webhook
from webhooks.services import webhook_create, webhook_delete, webhook_rotate, webhook_update

AGENT_ID = OpenApiParameter("agent_id", OpenApiTypes.UUID, OpenApiParameter.PATH)
_EXAMPLE_ID = "6f1c2b9e-0d4a-4c55-9a51-2f6f8b1d7c3e"
_EXAMPLE_WEBHOOK = {
    "id": _EXAMPLE_ID,
    "agent": "0b7e6a52-31f4-4a8e-8f5e-5c1d2b3a4f60",
    "name": "Shop orders",
    "url": f"https://agentdesk.example.com/api/v1/webhooks/{_EXAMPLE_ID}/",
    "is_enabled": True,
    "rotated_at": None,
    "previous_secret_valid_until": None,
    "last_delivery_at": None,
    "created_by": 7,
    "created_at": "2026-11-25T15:00:00Z",
    "updated_at": "2026-11-25T15:00:00Z",
}
_EXAMPLE_SECRET = "whsec_q3Y0m8pX1bV7n2Lk5cR9tW4eZ6aH0sJ3uG8fD1yK2o"  # noqa: S105 - an example
CREATED_EXAMPLE = OpenApiExample(
    "Created",
    value={**_EXAMPLE_WEBHOOK, "secret": _EXAMPLE_SECRET},
    response_only=True,
    status_codes=["201"],
)
ROTATED_EXAMPLE = OpenApiExample(
    "Rotated (the old secret accepted for one more hour)",
    value={
        **_EXAMPLE_WEBHOOK,
        "rotated_at": "2026-11-26T09:00:00Z",
        "previous_secret_valid_until": "2026-11-26T10:00:00Z",
        "secret": "whsec_N8d2Kq5Rz1Vb7Xw3Ty6Hm0Lp4Gc9Fs2Ja5Ue8Io1Pn",
    },
    response_only=True,
    status_codes=["200"],
)


@extend_schema_view(
    list=extend_schema(
        operation_id="webhooks_list",
        summary="The agent's inbound webhooks",
        parameters=[AGENT_ID],
        examples=[OpenApiExample("One webhook", value=_EXAMPLE_WEBHOOK, response_only=True)],
    ),
    retrieve=extend_schema(
        operation_id="webhooks_retrieve", summary="One webhook of the agent", parameters=[AGENT_ID]
    ),
    destroy=extend_schema(
        operation_id="webhooks_destroy",
        summary="Delete a webhook",
        description="Its URL answers 404 from then on; its trigger log rows stay.",
        parameters=[AGENT_ID],
    ),
)
class WebhookViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin, TenantViewSet
):
    serializer_class = WebhookSerializer
    ordering_fields = ["name", "created_at", "last_delivery_at"]
    ordering = ["name"]
    read_roles = WRITE_ROLES
    write_roles = WRITE_ROLES
    filterset_class = None

    def agent(self) -> Agent:
        agents = self.scope(Agent.objects.all())
        return access_object(agents, agency=None, id=parse_id(self.kwargs["agent_id"]))

    def get_queryset(self) -> Any:
        if getattr(self, "swagger_fake_view", False):  # schema generation: no request
            return Webhook.objects.none()
        return self.scope(Webhook.objects.filter(agent=self.agent()))

    def _with_secret(self, webhook: Webhook, secret: str, code: int) -> Response:
        return Response(WebhookSecretSerializer(webhook, context={"secret": secret}).data, code)

    @extend_schema(
        operation_id="webhooks_create",
        summary="Create a webhook",
        description=(
            "Answers with the webhook's `url` and its signing `secret`: the secret is shown in "
            "this response only (it is stored encrypted). Deliveries are signed as the README's "
            '"Webhooks" section shows.'
        ),
        parameters=[AGENT_ID],
        request=WebhookCreateSerializer,
        responses={201: WebhookSecretSerializer},
        examples=[
            OpenApiExample("Create", value={"name": "Shop orders"}, request_only=True),
            CREATED_EXAMPLE,
        ],
    )
    def create(self, request: Request, agent_id: str | None = None) -> Response:
        agent = self.agent()
        body = WebhookCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        webhook, secret = webhook_create(
            agent=agent,
            name=body.validated_data["name"],
            is_enabled=body.validated_data["is_enabled"],
            created_by_id=self.principal.user_id,
        )
        return self._with_secret(webhook, secret, status.HTTP_201_CREATED)

    @extend_schema(
        operation_id="webhooks_partial_update",
        summary="Rename, disable or enable a webhook",
        description="A disabled webhook refuses every delivery (403, in the trigger log).",
        parameters=[AGENT_ID],
        request=WebhookUpdateSerializer,
        responses={200: WebhookSerializer},
        examples=[OpenApiExample("Disable", value={"is_enabled": False}, request_only=True)],
    )
    def partial_update(
        self, request: Request, agent_id: str | None = None, pk: str | None = None
    ) -> Response:
        webhook = self.get_object()
        body = WebhookUpdateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        webhook = webhook_update(webhook=webhook, **body.validated_data)
        return Response(WebhookSerializer(webhook).data)

    def perform_destroy(self, instance: Webhook) -> None:
        webhook_delete(webhook=instance)

    @extend_schema(
        operation_id="webhooks_rotate",
        summary="Rotate a webhook's secret",
        description=(
            "Answers with the new `secret` (shown this once). The previous secret is still "
            "accepted for `grace_seconds` (default one day, 0 for none, at most 7 days), so that "
            "the sender can switch without losing deliveries; a secret still in an earlier "
            "rotation's grace period is refused from now on."
        ),
        parameters=[AGENT_ID],
        request=WebhookRotateSerializer,
        responses={200: WebhookSecretSerializer},
        examples=[
            OpenApiExample("One hour of grace", value={"grace_seconds": 3600}, request_only=True),
            ROTATED_EXAMPLE,
        ],
    )
    @action(detail=True, methods=["post"])
    def rotate(
        self, request: Request, agent_id: str | None = None, pk: str | None = None
    ) -> Response:
        webhook = self.get_object()
        body = WebhookRotateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        webhook, secret = webhook_rotate(
            webhook=webhook, grace_seconds=body.validated_data["grace_seconds"]
        )
        return self._with_secret(webhook, secret, status.HTTP_200_OK)
