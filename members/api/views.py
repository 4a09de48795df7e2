"""``/api/v1/members/`` and ``/api/v1/invitations/``: who belongs to the agency, with what role,
and who is invited. Every member reads the member list; agency admins change it and handle
invitations (reads included)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
)
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from core.api.base import TenantViewSet
from core.api.fields import ErrorSerializer
from core.api.filtering import FilterSet
from core.api.permissions import ADMIN_ROLES, ALL_ROLES
from core.models import Agency, Membership
from members import services
from members.api.serializers import (
    InvitationCreateSerializer,
    InvitationSerializer,
    MemberSerializer,
    MemberUpdateSerializer,
)
from members.models import Invitation

MEMBER_EXAMPLE = {
    "id": "3f1c8a52-5b7e-4f55-9a43-0c8f1f2f9a10",
    "user_id": 42,
    "username": "priya",
    "email": "priya@agency.example",
    "name": "Priya Raman",
    "role": "approver",
    "joined_at": "2026-11-25T10:02:11Z",
    "last_login": "2026-11-25T15:40:03Z",
}
INVITATION_EXAMPLE = {
    "id": "b7a2d7c0-2f61-4c1e-8f0e-5d3c1a9e7b44",
    "email": "sam@agency.example",
    "role": "viewer",
    "username": "",
    "status": "pending",
    "invited_by": 7,
    "expires_at": "2026-12-02T15:00:00Z",
    "last_sent_at": "2026-11-25T15:00:00Z",
    "send_count": 1,
    "accepted_at": None,
    "accepted_by": None,
    "revoked_at": None,
    "created_at": "2026-11-25T15:00:00Z",
}
LAST_ADMIN = OpenApiResponse(
    ErrorSerializer,
    description="Refused (400): e.g. `last_admin`, the agency's last admin cannot be demoted or "
    "removed.",
)


class MemberFilter(FilterSet):
    class Meta:
        model = Membership
        fields = ["role"]


@extend_schema_view(
    list=extend_schema(
        operation_id="members_list",
        summary="The agency's members",
        examples=[OpenApiExample("A member", value=MEMBER_EXAMPLE, response_only=True)],
    ),
    retrieve=extend_schema(operation_id="members_retrieve", summary="One member"),
    destroy=extend_schema(
        operation_id="members_destroy",
        summary="Remove a member from the agency",
        description=(
            "The login stays (logins are platform-wide) but belongs to no agency any more: it is "
            "refused from its next request on. The agency's last admin cannot be removed (400, "
            "code `last_admin`)."
        ),
        responses={204: None, 400: LAST_ADMIN},
    ),
)
class MemberViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin, TenantViewSet
):
    serializer_class = MemberSerializer
    filterset_class = MemberFilter
    ordering_fields = ["created_at", "role"]
    ordering = ["created_at"]
    http_method_names = ["get", "patch", "delete"]
    read_roles = ALL_ROLES
    write_roles = ADMIN_ROLES

    def get_queryset(self) -> Any:
        return self.scope(Membership.objects.select_related("user"))

    @extend_schema(
        operation_id="members_partial_update",
        summary="Change a member's role",
        description="The agency's last admin cannot be demoted (400, code `last_admin`).",
        request=MemberUpdateSerializer,
        responses={200: MemberSerializer},
        examples=[
            OpenApiExample("Make an approver", value={"role": "approver"}, request_only=True)
        ],
    )
    def partial_update(self, request: Request, pk: str | None = None) -> Response:
        member = self.get_object()
        body = MemberUpdateSerializer(data=request.data, partial=True)
        body.is_valid(raise_exception=True)
        if "role" in body.validated_data:  # a PATCH without it changes nothing
            services.membership_change_role(membership=member, role=body.validated_data["role"])
        return Response(MemberSerializer(self.get_queryset().get(pk=member.pk)).data)

    def perform_destroy(self, instance: Membership) -> None:
        services.membership_remove(membership=instance)


class InvitationFilter(FilterSet):
    class Meta:
        model = Invitation
        fields = ["role", "email"]


@extend_schema_view(
    list=extend_schema(
        operation_id="invitations_list",
        summary="The agency's invitations (newest first)",
        examples=[OpenApiExample("Pending", value=INVITATION_EXAMPLE, response_only=True)],
    ),
    retrieve=extend_schema(operation_id="invitations_retrieve", summary="One invitation"),
)
class InvitationViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantViewSet):
    """Agency admins only, reads included. The token is never returned: it exists only in the
    e-mail sent to the invitee."""

    serializer_class = InvitationSerializer
    filterset_class = InvitationFilter
    ordering_fields = ["created_at", "expires_at", "email"]
    ordering = ["-created_at"]
    read_roles = ADMIN_ROLES
    write_roles = ADMIN_ROLES

    def get_queryset(self) -> Any:
        return self.scope(Invitation.objects.all())

    def _agency(self) -> Agency:
        assert self.principal.agency_id is not None  # RolePermission: writes have an agency
        return Agency.objects.get(pk=self.principal.agency_id)

    @extend_schema(
        operation_id="invitations_create",
        summary="Invite someone by e-mail",
        description=(
            "E-mails a one-time link (valid `AGENTDESK_INVITATION_EXPIRY_DAYS` days, 7 by "
            "default) where the invitee sets a password, or logs in with the login their address "
            "already has, and joins the agency with `role`. Refused with 400: an invalid address "
            "or role, an address that is already a member's (`already_member`) or has a pending "
            "invitation (`duplicate_invitation`: resend or revoke it). 503 when the mail server "
            "refuses the e-mail (nothing is saved)."
        ),
        request=InvitationCreateSerializer,
        responses={201: InvitationSerializer},
        examples=[
            OpenApiExample(
                "Invite a viewer",
                value={"email": "sam@agency.example", "role": "viewer"},
                request_only=True,
            ),
            OpenApiExample("Sent", value=INVITATION_EXAMPLE, response_only=True),
        ],
    )
    def create(self, request: Request) -> Response:
        body = InvitationCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        invited_by = request.user if self.principal.user_id is not None else None
        invitation = services.invitation_create(
            agency=self._agency(),
            email=data["email"],
            role=data["role"],
            username=data["username"],
            invited_by=invited_by,  # type: ignore[arg-type]
        )
        return Response(InvitationSerializer(invitation).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        operation_id="invitations_resend",
        summary="Send the invitation again, with a new link",
        description=(
            "The earlier link stops working; the new one is valid for the full period. 400 "
            "(`not_pending`) for an accepted or revoked invitation."
        ),
        request=None,
        responses={200: InvitationSerializer},
    )
    @action(detail=True, methods=["post"])
    def resend(self, request: Request, pk: str | None = None) -> Response:
        self.expect_no_body(request)
        invitation = services.invitation_resend(invitation=self.get_object(), agency=self._agency())
        return Response(InvitationSerializer(invitation).data)

    @extend_schema(
        operation_id="invitations_revoke",
        summary="Revoke an invitation",
        description=(
            "Idempotent: its link stops working. 400 (`not_pending`) for an accepted invitation: "
            "remove the member instead."
        ),
        request=None,
        responses={200: InvitationSerializer},
    )
    @action(detail=True, methods=["post"])
    def revoke(self, request: Request, pk: str | None = None) -> Response:
        self.expect_no_body(request)
        invitation = services.invitation_revoke(invitation=self.get_object())
        return Response(InvitationSerializer(invitation).data)
