"""What the inbox's selectors share: the tenant scope they run in, times in words, the inbox's
URLs of an item, and an approval's action in words."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from django.urls import reverse
from django.utils import timezone

from approvals.describe import describe_action
from approvals.models import Approval
from core import tenancy


@contextmanager
def inbox_scope(agency_id: uuid.UUID) -> Iterator[None]:
    """The block's queries see that agency only, also for a superuser (whose request sees all)."""
    with tenancy.agency_context(agency_id):
        yield


def _span(seconds: float) -> str:
    """A duration at a glance: ``40 s``, ``12 min``, ``23 h``, ``3 d``."""
    if seconds < 60:
        return f"{max(0, int(seconds))} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min"
    if seconds < 48 * 3600:
        return f"{int(seconds // 3600)} h"
    return f"{int(seconds // 86400)} d"


def age(value: datetime.datetime | None, *, now: datetime.datetime | None = None) -> str:
    """``3 min ago`` (``just now`` under a minute)."""
    if value is None:
        return ""
    seconds = ((now or timezone.now()) - value).total_seconds()
    return "just now" if seconds < 60 else f"{_span(seconds)} ago"


def expires_in(value: datetime.datetime | None, *, now: datetime.datetime | None = None) -> str:
    """``expires in 23 h``; ``expired`` once past; "" when it never expires."""
    if value is None:
        return ""
    seconds = (value - (now or timezone.now())).total_seconds()
    return "expired" if seconds <= 0 else f"expires in {_span(seconds)}"


def approval_url(approval_id: uuid.UUID | str) -> str:
    return reverse("approvals_inbox:approval", args=[approval_id])


def question_url(question_id: uuid.UUID | str) -> str:
    return reverse("approvals_inbox:question", args=[question_id])


def action_in_words(approval: Approval) -> str:
    tool = approval.tool_call.tool if approval.tool_call and approval.tool_call.tool else None
    return describe_action(
        approval.action_type,
        approval.proposed_arguments,
        display_name=tool.display_name if tool is not None else "",
    )
