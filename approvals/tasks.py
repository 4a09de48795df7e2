"""Celery tasks of approvals: the deciders' e-mail, and beat's expiry of what nobody decided."""

from __future__ import annotations

import logging

from celery import shared_task
from django.utils import timezone

from approvals import notify, questions
from approvals.models import Approval, ApprovalStatus, Question, QuestionStatus
from approvals.services import approval_expire
from core import tenancy
from core.tenancy import TenantTask

logger = logging.getLogger(__name__)
# Items of each kind expired per tick; the rest wait for the next tick.
EXPIRY_BATCH = 500


@shared_task(name="approvals.notify_deciders", base=TenantTask, ignore_result=True)
def notify_deciders(kind: str, item_id: str) -> int:
    model = Approval if kind == "approval" else Question
    item = model.objects.select_related("agent").filter(pk=item_id).first()
    return 0 if item is None else notify.send_decider_emails(kind, item)


@shared_task(name="approvals.expire_waiting", ignore_result=True)
def expire_waiting() -> int:
    """Beat: approvals and questions past their ``expires_at`` expire, and their runs end.
    Found across agencies, then each expired in its own agency (a decision that came first
    wins: every item is decided again on its locked row)."""
    now = timezone.now()
    with tenancy.platform_context():
        due_approvals = list(
            Approval.objects.filter(status=ApprovalStatus.PENDING, expires_at__lte=now)
            .order_by("expires_at")
            .values_list("id", "agency_id")[:EXPIRY_BATCH]
        )
        due_questions = list(
            Question.objects.filter(status=QuestionStatus.PENDING, expires_at__lte=now)
            .order_by("expires_at")
            .values_list("id", "agency_id")[:EXPIRY_BATCH]
        )
    expired = 0
    for approval_id, agency_id in due_approvals:
        with tenancy.agency_context(agency_id):
            expired += approval_expire(Approval(pk=approval_id), now=now)
    for question_id, agency_id in due_questions:
        with tenancy.agency_context(agency_id):
            expired += questions.question_expire(Question(pk=question_id), now=now)
    if expired:
        logger.info("expired %d approval(s) and question(s) nobody answered in time", expired)
    return expired
