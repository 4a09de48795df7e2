"""Small display helpers of the staff home's templates."""

from __future__ import annotations

import datetime
from typing import Any

from django import template
from django.urls import reverse
from django.utils import timezone
from django.utils.timesince import timesince

from agents.models import ExecutionStatus

register = template.Library()

_VARIANTS = {
    ExecutionStatus.PENDING: "default",
    ExecutionStatus.RUNNING: "info",
    ExecutionStatus.WAITING_APPROVAL: "warning",
    ExecutionStatus.WAITING_INPUT: "warning",
    ExecutionStatus.COMPLETED: "success",
    ExecutionStatus.FAILED: "danger",
    ExecutionStatus.TIMED_OUT: "danger",
    ExecutionStatus.CANCELLED: "default",
}


@register.filter
def status_variant(status: str) -> str:
    """unfold's label variant for an execution status."""
    return _VARIANTS.get(status, "default")  # type: ignore[call-overload]


_RISK_VARIANTS = {"low": "info", "medium": "warning", "high": "danger", "critical": "danger"}


@register.filter
def risk_variant(level: str) -> str:
    return _RISK_VARIANTS.get(level, "default")


@register.filter
def ago(value: datetime.datetime | None) -> str:
    """``3 minutes ago``, ``2 hours ago``, ``just now``: one unit is enough at a glance."""
    if value is None:
        return "-"
    if timezone.now() - value < datetime.timedelta(minutes=1):
        return "just now"
    return f"{timesince(value, depth=1)} ago"


@register.simple_tag
def admin_change(obj: Any) -> str:
    """The admin page of ``obj`` (its view page for read-only admins)."""
    opts = obj._meta
    return reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.pk])


@register.simple_tag
def admin_changelist(app_label: str, model_name: str) -> str:
    return reverse(f"admin:{app_label}_{model_name}_changelist")
