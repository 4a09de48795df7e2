from __future__ import annotations

from rest_framework import serializers

from approvals.models import Approval
from core.api.fields import JSONObjectField, StrictSerializer


class ApprovalSerializer(serializers.ModelSerializer):
    class Meta:
        model = Approval
        fields = [
            "id",
            "execution",
            "agent",
            "site",
            "tool_call",
            "risk_rule",
            "action_type",
            "action_description",
            "proposed_arguments",
            "edited_arguments",
            "risk_level",
            "risk_explanation",
            "status",
            "decided_by",
            "decided_at",
            "decision_reason",
            "expires_at",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields


class DecisionSerializer(StrictSerializer):
    decision = serializers.ChoiceField(choices=[("approve", "Approve"), ("deny", "Deny")])
    reason = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")
    edited_arguments = JSONObjectField(
        required=False,
        allow_null=True,
        default=None,
        help_text="Approve with these tool arguments instead of the proposed ones.",
    )

    def validate(self, attrs: dict[str, object]) -> dict[str, object]:
        if attrs.get("edited_arguments") is not None and attrs["decision"] != "approve":
            raise serializers.ValidationError(
                {"edited_arguments": ["Only an approval can change the arguments."]}
            )
        return attrs
