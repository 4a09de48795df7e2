"""Approve selected: the inbox's low-risk approvals approved together (approvals/bulk.py), then
back to the list with what came of each."""

from __future__ import annotations

import uuid

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from approvals.bulk import approval_bulk_approve
from approvals.inbox import selectors
from approvals.inbox.views.common import require_decider
from core.admin_scoping import is_member
from core.exceptions import ApplicationError
from live.views import home_agency


def _ids(request: HttpRequest) -> list[uuid.UUID]:
    ids = []
    for value in request.POST.getlist("approval"):
        try:
            ids.append(uuid.UUID(value))
        except ValueError:
            continue  # not one of ours: nothing to approve
    return ids


@require_POST
def approval_bulk(request: HttpRequest) -> HttpResponse:
    """POST ``approval`` (repeated): approve those of the agency's low-risk approvals, each once."""
    require_decider(request)
    back = redirect("approvals_inbox:list")
    agency = home_agency(request, remember=False) if is_member(request) else None
    if agency is None:
        return back
    try:
        with selectors.inbox_scope(agency.pk):
            outcome = approval_bulk_approve(
                agency_id=agency.pk, approval_ids=_ids(request), user_id=request.user.pk
            )
    except ApplicationError as exc:
        messages.error(request, exc.message)
        return back
    if outcome.approved:
        n = len(outcome.approved)
        messages.success(request, f"Approved {n} low-risk action{'s' if n > 1 else ''}.")
    if outcome.already_decided:
        n = len(outcome.already_decided)
        messages.info(
            request,
            f"{n} {'were' if n > 1 else 'was'} already decided by someone else: not changed.",
        )
    if outcome.not_allowed:
        messages.warning(
            request,
            "Only low-risk actions are approved together: open the others to decide them "
            f"({', '.join(selectors.action_in_words(a) for a in outcome.not_allowed)}).",
        )
    for approval, error in outcome.refused:
        messages.error(request, f"{selectors.action_in_words(approval)}: {error.message}")
    return back
