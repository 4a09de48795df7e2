"""The inbox's lists: the approvals and questions that wait for a person in one agency (riskiest
first), those settled lately, and the waiting counts."""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass
from typing import Literal

from django.db.models import QuerySet

from approvals.bulk import BULK_RISK_LEVELS
from approvals.describe import clip
from approvals.inbox.selectors.common import (
    action_in_words,
    age,
    approval_url,
    expires_in,
    question_url,
)
from approvals.models import (
    Approval,
    ApprovalStatus,
    Question,
    QuestionKind,
    QuestionStatus,
    RiskLevel,
)
from core.models import Agency

# The order items are worked in: the riskiest first. A question holds a run up as surely as a
# high-risk approval does, and a correction means a run is already failing: both count as high.
RISK_ORDER: dict[str, int] = {
    RiskLevel.CRITICAL: 0,
    RiskLevel.HIGH: 1,
    RiskLevel.MEDIUM: 2,
    RiskLevel.LOW: 3,
}
QUESTION_RISK = RiskLevel.HIGH
PENDING_LIMIT = 200  # per kind; the page says when more wait
DECIDED_LIMIT = 50

ItemKind = Literal["approval", "question"]


@dataclass(frozen=True)
class InboxItem:
    """One card of the inbox: an approval or a question, in the words a person judges it by."""

    kind: ItemKind
    id: uuid.UUID
    url: str
    risk_level: str
    agent_name: str
    title: str  # the action in words, or the question
    subtitle: str  # the tool's name, or what kind of question
    created_at: datetime.datetime
    expires_at: datetime.datetime | None
    status: str
    status_label: str
    decided_by: str = ""
    decided_at: datetime.datetime | None = None
    note: str = ""  # a decision's reason or an answer
    is_correction: bool = False

    @property
    def pending(self) -> bool:
        return self.status == "pending"

    @property
    def age(self) -> str:
        return age(self.created_at)

    @property
    def time_left(self) -> str:
        return expires_in(self.expires_at) if self.pending else ""

    @property
    def risk_label(self) -> str:
        return RiskLevel(self.risk_level).label if self.risk_level in RiskLevel.values else ""

    @property
    def bulk_approvable(self) -> bool:
        """A pending low-risk approval: "Approve selected" may approve it unopened."""
        return self.pending and self.kind == "approval" and self.risk_level in BULK_RISK_LEVELS


@dataclass(frozen=True)
class InboxCounts:
    approvals: int
    questions: int

    @property
    def total(self) -> int:
        return self.approvals + self.questions


def _approvals(agency: Agency) -> QuerySet[Approval]:
    return Approval.objects.filter(agency=agency).select_related(
        "agent", "decided_by", "tool_call__tool"
    )


def _questions(agency: Agency) -> QuerySet[Question]:
    return Question.objects.filter(agency=agency).select_related("agent", "responded_by")


def _approval_item(approval: Approval) -> InboxItem:
    return InboxItem(
        kind="approval",
        id=approval.id,
        url=approval_url(approval.id),
        risk_level=approval.risk_level,
        agent_name=approval.agent.name,
        title=action_in_words(approval),
        subtitle=approval.action_type,
        created_at=approval.created_at,
        expires_at=approval.expires_at,
        status=approval.status,
        status_label=approval.get_status_display(),
        decided_by=str(approval.decided_by) if approval.decided_by_id else "",
        decided_at=approval.decided_at,
        note=approval.decision_reason,
    )


def _question_item(question: Question) -> InboxItem:
    correction = question.kind == QuestionKind.CORRECTION
    return InboxItem(
        kind="question",
        id=question.id,
        url=question_url(question.id),
        risk_level=QUESTION_RISK,
        agent_name=question.agent.name,
        title=clip(question.question, 300),
        subtitle="Help after repeated failures" if correction else "Question",
        created_at=question.created_at,
        expires_at=question.expires_at,
        status=question.status,
        status_label=question.get_status_display(),
        decided_by=str(question.responded_by) if question.responded_by_id else "",
        decided_at=question.response_timestamp,
        note=question.user_response,
        is_correction=correction,
    )


def _by_risk_then_newest(item: InboxItem) -> tuple[int, float]:
    return (RISK_ORDER.get(item.risk_level, len(RISK_ORDER)), -item.created_at.timestamp())


def pending_items(*, agency: Agency, limit: int = PENDING_LIMIT) -> list[InboxItem]:
    """Pending approvals and open questions of ``agency``: critical first, then high (questions
    too), medium, low; the newest first within a level."""
    approvals = _approvals(agency).filter(status=ApprovalStatus.PENDING).order_by("-created_at")
    questions = _questions(agency).filter(status=QuestionStatus.PENDING).order_by("-created_at")
    items = [_approval_item(a) for a in approvals[:limit]]
    items += [_question_item(q) for q in questions[:limit]]
    return sorted(items, key=_by_risk_then_newest)


def pending_counts(*, agency: Agency) -> InboxCounts:
    return InboxCounts(
        approvals=Approval.objects.filter(agency=agency, status=ApprovalStatus.PENDING).count(),
        questions=Question.objects.filter(agency=agency, status=QuestionStatus.PENDING).count(),
    )


def decided_items(*, agency: Agency, limit: int = DECIDED_LIMIT) -> list[InboxItem]:
    """The latest ``limit`` items no longer waiting (decided, answered, expired, cancelled),
    the most recently settled first."""
    approvals = (
        _approvals(agency).exclude(status=ApprovalStatus.PENDING).order_by("-updated_at")[:limit]
    )
    questions = (
        _questions(agency).exclude(status=QuestionStatus.PENDING).order_by("-updated_at")[:limit]
    )
    settled = [(a.updated_at, _approval_item(a)) for a in approvals]
    settled += [(q.updated_at, _question_item(q)) for q in questions]
    settled.sort(key=lambda pair: pair[0], reverse=True)
    return [item for _, item in settled[:limit]]


# The waiting list's chips: each risk level, and questions (whatever their weight).
QUESTIONS_CHIP = "questions"
CHIP_VALUES = (RiskLevel.CRITICAL, RiskLevel.HIGH, RiskLevel.MEDIUM, RiskLevel.LOW, QUESTIONS_CHIP)


@dataclass(frozen=True)
class Chip:
    value: str  # "" for all
    label: str
    count: int


def in_chip(item: InboxItem, value: str) -> bool:
    if not value:
        return True
    if value == QUESTIONS_CHIP:
        return item.kind == "question"
    return item.kind == "approval" and item.risk_level == value


def chips(items: list[InboxItem]) -> list[Chip]:
    """All, then each risk level's approvals and the questions, with how many of ``items`` each
    holds."""
    labels = {**{level.value: level.label for level in RiskLevel}, QUESTIONS_CHIP: "Questions"}
    return [Chip("", "All", len(items))] + [
        Chip(value, labels[value], sum(1 for item in items if in_chip(item, value)))
        for value in CHIP_VALUES
    ]
