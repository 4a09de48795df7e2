"""Questions other apps ask through :mod:`approvals.questions`, by ``Question.question_type``:
the observation a run resumes with after a person's answer, and how it ends when the person
stops it instead. An app registers its types from its ``AppConfig.ready()`` (flow: its loop
question), so that approvals imports no app that asks it something."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from approvals.models import Question


@dataclass(frozen=True)
class QuestionType:
    # The observation a run resumes with after the answer.
    resumed: Callable[[Question], str | None]
    # (status, stop reason, error) of a run a person stopped instead of answering; ``who`` is
    # " by <person>" or "".
    stopped: Callable[[Question, str], tuple[str, str, str] | None]


_types: dict[str, QuestionType] = {}


def register(question_type: str, handler: QuestionType) -> None:
    _types[question_type] = handler


def handler_for(question: Question) -> QuestionType | None:
    return _types.get(question.question_type) if question.question_type else None
