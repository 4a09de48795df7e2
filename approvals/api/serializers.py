from __future__ import annotations

from rest_framework import serializers

from approvals.models import Approval, Question
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
    reason = serializers.CharField(
        max_length=2000,
        required=False,
        allow_blank=True,
        default="",
        help_text="Why; required to deny.",
    )
    continue_run = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Deny only, where the agent allows it (deny_may_continue): tell the agent no "
        "and let the run continue instead of cancelling it.",
    )
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
        if attrs["decision"] == "deny" and not str(attrs.get("reason") or "").strip():
            raise serializers.ValidationError({"reason": ["Say why the action is denied."]})
        if attrs.get("continue_run") and attrs["decision"] != "deny":
            raise serializers.ValidationError(
                {"continue_run": ["Only a deny chooses how the run goes on."]}
            )
        return attrs


class QuestionSerializer(serializers.ModelSerializer):
    class Meta:
        model = Question
        fields = [
            "id",
            "execution",
            "agent",
            "site",
            "tool_call",
            "kind",
            "question",
            "question_type",
            "options",
            "allow_other",
            "triggered_by",
            "context",
            "status",
            "user_response",
            "responded_by",
            "response_timestamp",
            "resolution_action",
            "expires_at",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields


class AnswerSerializer(StrictSerializer):
    answer = serializers.CharField(
        max_length=4000,
        required=False,
        allow_blank=True,
        default="",
        help_text="The answer (for a correction: the hint the run retries with). Required "
        "unless stop is true.",
    )
    stop = serializers.BooleanField(
        required=False, default=False, help_text="End the run instead of answering."
    )

    def validate(self, attrs: dict[str, object]) -> dict[str, object]:
        if not attrs["stop"] and not str(attrs.get("answer") or "").strip():
            raise serializers.ValidationError({"answer": ["Write an answer (or stop the run)."]})
        return attrs
