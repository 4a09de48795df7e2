"""The approvers' queue: list approvals (``?status=pending``) and decide one."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from approvals.api.serializers import (
    AnswerSerializer,
    ApprovalSerializer,
    DecisionSerializer,
    QuestionSerializer,
)
from approvals.models import Approval, Question
from approvals.questions import question_answer
from approvals.services import approval_decide
from core.api.base import TenantViewSet
from core.api.fields import ErrorSerializer
from core.api.filtering import FilterSet
from core.api.permissions import APPROVE_ROLES
from core.exceptions import ApplicationError


class ApprovalFilter(FilterSet):
    class Meta:
        model = Approval
        fields = ["status", "risk_level", "agent", "execution", "site", "action_type"]


@extend_schema_view(
    list=extend_schema(operation_id="approvals_list", summary="List approvals"),
    retrieve=extend_schema(operation_id="approvals_retrieve", summary="Get an approval"),
)
class ApprovalViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantViewSet):
    serializer_class = ApprovalSerializer
    filterset_class = ApprovalFilter
    ordering_fields = ["created_at", "expires_at", "risk_level"]
    ordering = ["-created_at"]
    action_roles = {"decide": APPROVE_ROLES}

    def get_queryset(self) -> Any:
        return self.scope(Approval.objects.all())

    @extend_schema(
        operation_id="approvals_decide",
        summary="Approve or deny",
        description=(
            "Approve (optionally with edited arguments, validated against the tool's schema) or "
            "deny a pending approval (a reason is required). Approved: the run resumes and the "
            "tool runs once, if it is still allowed then. Denied: the run is cancelled, or, "
            "with continue_run where the agent allows it, goes on with the refusal as the "
            "tool's result. A second decision is a 409."
        ),
        request=DecisionSerializer,
        responses={
            200: ApprovalSerializer,
            409: OpenApiResponse(ErrorSerializer, description="Already decided."),
        },
    )
    @action(detail=True, methods=["post"])
    def decide(self, request: Request, pk: str | None = None) -> Response:
        approval = self.get_object()
        body = DecisionSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            decided = approval_decide(
                approval=approval,
                approve=body.validated_data["decision"] == "approve",
                user_id=self.principal.user_id,
                reason=body.validated_data["reason"],
                edited_arguments=body.validated_data["edited_arguments"],
                continue_run=body.validated_data["continue_run"],
            )
        except ApplicationError as exc:
            if exc.code == "invalid_arguments":  # the tool's schema refused them: a field error
                problems = [f"{e['path']}: {e['message']}" for e in exc.extra.get("errors", [])]
                exc.extra.setdefault("fields", {"edited_arguments": problems})
            raise
        return Response(ApprovalSerializer(decided).data)


class QuestionFilter(FilterSet):
    class Meta:
        model = Question
        fields = ["status", "kind", "agent", "execution", "site"]


@extend_schema_view(
    list=extend_schema(operation_id="questions_list", summary="List questions"),
    retrieve=extend_schema(operation_id="questions_retrieve", summary="Get a question"),
)
class QuestionViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantViewSet):
    """Questions runs wait on: an agent's ``ask_user`` call, or a person's help after a tool kept
    failing (``kind: correction``). ``?status=pending`` is what waits for an answer."""

    serializer_class = QuestionSerializer
    filterset_class = QuestionFilter
    ordering_fields = ["created_at", "expires_at"]
    ordering = ["-created_at"]
    action_roles = {"answer": APPROVE_ROLES}

    def get_queryset(self) -> Any:
        return self.scope(Question.objects.all())

    @extend_schema(
        operation_id="questions_answer",
        summary="Answer (or stop the run)",
        description=(
            "Answer a pending question: the run resumes with the answer as its ask_user call's "
            "result, for a correction with the answer as a hint, for a clarification the run "
            "asked before acting (understanding phase) with the answer as what a person said. "
            "stop: true ends the run instead. A second answer is a 409."
        ),
        request=AnswerSerializer,
        responses={
            200: QuestionSerializer,
            409: OpenApiResponse(ErrorSerializer, description="Already answered."),
        },
    )
    @action(detail=True, methods=["post"])
    def answer(self, request: Request, pk: str | None = None) -> Response:
        question = self.get_object()
        body = AnswerSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        answered = question_answer(
            question=question,
            answer=body.validated_data["answer"],
            user_id=self.principal.user_id,
            stop=body.validated_data["stop"],
        )
        return Response(QuestionSerializer(answered).data)
