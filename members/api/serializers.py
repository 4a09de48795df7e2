"""Serializers of the members and invitations endpoints."""

from __future__ import annotations

from rest_framework import serializers

from core.api.fields import StrictSerializer, documented
from core.models import Membership, Role
from members.models import Invitation, InvitationStatus


class MemberSerializer(serializers.ModelSerializer):
    user_id = serializers.IntegerField(source="user.id", read_only=True)
    username = serializers.CharField(source="user.username", read_only=True)
    email = serializers.CharField(source="user.email", read_only=True)
    name = serializers.SerializerMethodField()
    last_login = serializers.DateTimeField(
        source="user.last_login", read_only=True, allow_null=True
    )
    joined_at = serializers.DateTimeField(source="created_at", read_only=True)

    class Meta:
        model = Membership
        fields = ["id", "user_id", "username", "email", "name", "role", "joined_at", "last_login"]
        read_only_fields = fields

    def get_name(self, obj: Membership) -> str:
        return obj.user.get_full_name()


class MemberUpdateSerializer(StrictSerializer):
    role = serializers.ChoiceField(choices=Role.choices)


class InvitationSerializer(serializers.ModelSerializer):
    status = serializers.ChoiceField(choices=InvitationStatus.choices, read_only=True)

    class Meta:
        model = Invitation
        fields = [
            "id", "email", "role", "username", "status", "invited_by", "expires_at",
            "last_sent_at", "send_count", "accepted_at", "accepted_by", "revoked_at",
            "created_at",
        ]  # fmt: skip
        read_only_fields = fields


# Django's usernames: letters, digits and @.+-_ (UnicodeUsernameValidator); empty: none chosen.
UsernameField = documented(
    serializers.CharField,
    {"type": "string", "maxLength": 150, "pattern": r"^[\w.@+-]*$"},
    "UsernameField",
)


class InvitationCreateSerializer(StrictSerializer):
    email = serializers.EmailField(max_length=254, help_text="Where the one-time link is sent.")
    role = serializers.ChoiceField(choices=Role.choices, default=Role.STAFF)
    username = UsernameField(
        max_length=150,
        required=False,
        allow_blank=True,
        default="",
        help_text="The new login's username; empty: the invitee chooses one. Ignored when the "
        "address already has a login (the invitee logs in with it).",
    )
