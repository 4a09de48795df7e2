"""One approval: its page (the proposed action, the run that led to it, what came of it), and
the decisions: approve as proposed, deny (with a confirmation), edit and approve (with a
confirmation of what changed)."""

from __future__ import annotations

import json
import uuid
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from agents.models import StopReason
from approvals.edits import approval_check_edit
from approvals.inbox import selectors
from approvals.inbox.forms import DenyForm
from approvals.inbox.schema_form import ArgumentsForm, argument_label
from approvals.inbox.views.common import argument_rows, can_decide, render_page, require_decider
from approvals.models import Approval, ApprovalStatus
from approvals.services import approval_decide
from core.admin_scoping import is_member, request_agency
from core.exceptions import ApplicationError
from tools.models import ToolCallStatus

ARGUMENTS_PREFIX = "arg"


# --- one approval --------------------------------------------------------------------------------


def _approval(request: HttpRequest, approval_id: uuid.UUID) -> Approval:
    if not is_member(request):
        raise Http404("No approval matches the given query.")
    return selectors.access_approval(agency=request_agency(request), id=approval_id)


def _approval_outcome(approval: Approval) -> dict[str, str] | None:
    """What came of a settled approval, in a sentence: who decided, and whether the tool ran."""
    who = str(approval.decided_by) if approval.decided_by_id else "someone"
    call = approval.tool_call
    if approval.status == ApprovalStatus.APPROVED:
        headline = f"Approved by {who}"
        if call is None:
            detail = ""
        elif call.status == ToolCallStatus.COMPLETED:
            detail = "The tool ran."
        elif call.status == ToolCallStatus.FAILED:
            detail = f"The tool ran and failed: {call.error or call.error_code}"
        elif call.status in (ToolCallStatus.DENIED, ToolCallStatus.CANCELLED):
            headline = f"Approved by {who}, but not run"
            detail = call.error or "The run ended before the tool could run."
        else:
            detail = "The run resumes and the tool runs once."
        return {"variant": "success", "headline": headline, "detail": detail}
    if approval.status == ApprovalStatus.DENIED:
        if approval.execution.stop_reason == StopReason.APPROVAL_DENIED:
            detail = "The run was cancelled; the action was not run."
        else:
            detail = "The agent was told no and its run went on; the action was not run."
        return {"variant": "danger", "headline": f"Denied by {who}", "detail": detail}
    if approval.status == ApprovalStatus.EXPIRED:
        return {
            "variant": "warning",
            "headline": "Expired",
            "detail": (call.error if call is not None and call.error else "")
            or "Nobody decided in time: the action was not run.",
        }
    if approval.status == ApprovalStatus.CANCELLED:
        return {
            "variant": "default",
            "headline": "Cancelled",
            "detail": "The run ended while this waited: the action was not run.",
        }
    return None


def _approval_context(request: HttpRequest, approval: Approval) -> dict[str, Any]:
    tool = approval.tool_call.tool if approval.tool_call is not None else None
    schema = tool.parameters_schema if tool is not None else None
    with selectors.inbox_scope(approval.agency_id):
        run = selectors.run_context(approval.execution)
    pending = approval.status == ApprovalStatus.PENDING
    return {
        "title": "Approval",
        "item": approval,
        "action": selectors.action_in_words(approval),
        "tool": tool,
        "arguments": argument_rows(approval.proposed_arguments, schema),
        "raw_arguments": json.dumps(approval.proposed_arguments, indent=2, ensure_ascii=False),
        "edited": argument_rows(approval.edited_arguments, schema)
        if approval.edited_arguments is not None
        else None,
        "run": run,
        "pending": pending,
        "can_decide": can_decide(request) and pending,
        "outcome": _approval_outcome(approval),
        "expires_in": selectors.expires_in(approval.expires_at),
        "may_continue": approval.agent.deny_may_continue,
        "risk_condition": json.dumps(approval.risk_rule.condition)
        if approval.risk_rule is not None and approval.risk_rule.condition
        else "",
    }


def _approval_page(
    request: HttpRequest,
    approval: Approval,
    *,
    status: int = 200,
    banner: str = "",
    deny_form: DenyForm | None = None,
) -> HttpResponse:
    context = _approval_context(request, approval)
    context["banner"] = banner
    context["deny_form"] = deny_form or DenyForm(
        may_continue=approval.agent.deny_may_continue, auto_id="deny_%s"
    )
    return render_page(request, "approvals/inbox/approval.html", context, status=status)


def _decided_meanwhile(request: HttpRequest, approval_id: uuid.UUID) -> HttpResponse:
    """The item as it is now, saying that someone else decided it first (a 409)."""
    fresh = _approval(request, approval_id)
    outcome = _approval_outcome(fresh)
    when = timezone.localtime(fresh.decided_at or fresh.updated_at)
    banner = f"{outcome['headline'] if outcome else fresh.get_status_display()} at {when:%H:%M}"
    banner += f" on {when:%Y-%m-%d}" if when.date() != timezone.localdate() else ""
    banner = f"Already decided: {banner}. Your decision was not applied."
    return _approval_page(request, fresh, status=409, banner=banner)


def _decide(
    request: HttpRequest, approval: Approval, **decision: Any
) -> tuple[HttpResponse | None, ApplicationError | None]:
    """Call the service in the approval's agency; a decision taken meanwhile becomes the item's
    page with a banner. Returns (response, None) when done or conflicting, (None, error) for
    an error the caller shows on its form."""
    try:
        with selectors.inbox_scope(approval.agency_id):
            approval_decide(approval=approval, user_id=request.user.pk, **decision)
    except ApplicationError as exc:
        if exc.code == "already_decided":
            return _decided_meanwhile(request, approval.pk), None
        return None, exc
    return None, None


@require_GET
def approval_detail(request: HttpRequest, approval_id: uuid.UUID) -> HttpResponse:
    return _approval_page(request, _approval(request, approval_id))


@require_POST
def approval_approve(request: HttpRequest, approval_id: uuid.UUID) -> HttpResponse:
    """One tap: approve as proposed."""
    approval = _approval(request, approval_id)
    require_decider(request)
    response, error = _decide(request, approval, approve=True)
    if response is not None:
        return response
    if error is not None:
        messages.error(request, error.message)
        return redirect(selectors.approval_url(approval.pk))
    messages.success(request, f"Approved: {selectors.action_in_words(approval)}.")
    return redirect("approvals_inbox:list")


@require_http_methods(["GET", "POST"])
def approval_deny(  # noqa: PLR0911 - one return per step of the flow
    request: HttpRequest, approval_id: uuid.UUID
) -> HttpResponse:
    """GET: the deny form. POST: the confirmation page; POST with ``confirmed``: deny."""
    approval = _approval(request, approval_id)
    if approval.status != ApprovalStatus.PENDING:
        if request.method == "POST":
            require_decider(request)
            return _decided_meanwhile(request, approval.pk)
        return redirect(selectors.approval_url(approval.pk))
    require_decider(request)
    may_continue = approval.agent.deny_may_continue
    form = DenyForm(
        request.POST if request.method == "POST" else None,
        may_continue=may_continue,
        auto_id="deny_%s",
    )
    context = {
        **_approval_context(request, approval),
        "title": "Deny",
        "form": form,
    }
    if request.method == "GET":
        return render_page(request, "approvals/inbox/deny.html", context)
    if not form.is_valid():
        return render_page(request, "approvals/inbox/deny.html", context, status=400)
    if "back" in request.POST:  # from the confirmation: change the reason
        return render_page(request, "approvals/inbox/deny.html", context)
    if "confirmed" not in request.POST:
        return render_page(request, "approvals/inbox/deny_confirm.html", context)
    response, error = _decide(
        request,
        approval,
        approve=False,
        reason=form.cleaned_data["reason"],
        continue_run=may_continue and form.continue_run,
    )
    if response is not None:
        return response
    if error is not None:
        form.add_error("reason" if error.code.startswith("reason") else None, error.message)
        return render_page(request, "approvals/inbox/deny.html", context, status=400)
    then = "its run goes on" if form.continue_run else "the run is cancelled"
    messages.success(request, f"Denied: {selectors.action_in_words(approval)} ({then}).")
    return redirect("approvals_inbox:list")


def _arguments_form(approval: Approval, data: Any = None) -> ArgumentsForm:
    tool = approval.tool_call.tool if approval.tool_call is not None else None
    return ArgumentsForm(
        tool.parameters_schema if tool is not None else None,
        approval.proposed_arguments,
        data,
        prefix=ARGUMENTS_PREFIX,
    )


def _shown(value: Any) -> str:
    """An argument's value as a person reads it: text as text, anything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False)


def _changes(before: dict[str, Any], after: dict[str, Any], schema: Any) -> list[dict[str, Any]]:
    """The arguments the edit changed, added or removed, for the confirmation page (named as
    the edit form names them)."""
    rows = []
    for name in [*before, *(k for k in after if k not in before)]:
        old, new = before.get(name), after.get(name)
        if name in before and name in after and old == new:
            continue
        rows.append(
            {
                "name": argument_label(name, schema),
                "before": _shown(old) if name in before else "(not set)",
                "after": _shown(new) if name in after else "(removed)",
            }
        )
    return rows


def _refused_edit(
    request: HttpRequest, form: ArgumentsForm, context: dict[str, Any], error: ApplicationError
) -> HttpResponse:
    """The edit form again, with what the tool's schema (or the decision) refused."""
    if error.code == "invalid_arguments":
        form.add_argument_errors(error.extra.get("errors") or [])
    else:
        form.add_error(None, error.message)
    return render_page(request, "approvals/inbox/edit.html", context, status=400)


@require_http_methods(["GET", "POST"])
def approval_edit(  # noqa: PLR0911 - one return per step of the flow
    request: HttpRequest, approval_id: uuid.UUID
) -> HttpResponse:
    """GET: the arguments as a form. POST: the confirmation page (what changed), once the
    edited arguments match the tool's schema (else the form again, with the errors); POST with
    ``confirmed``: approve with them, which the service checks again with the same code."""
    approval = _approval(request, approval_id)
    if approval.status != ApprovalStatus.PENDING:
        if request.method == "POST":
            require_decider(request)
            return _decided_meanwhile(request, approval.pk)
        return redirect(selectors.approval_url(approval.pk))
    require_decider(request)
    form = _arguments_form(approval, request.POST if request.method == "POST" else None)
    context = {**_approval_context(request, approval), "title": "Edit and approve", "form": form}
    if request.method == "GET":
        return render_page(request, "approvals/inbox/edit.html", context)
    if not form.is_valid():
        return render_page(request, "approvals/inbox/edit.html", context, status=400)
    if "back" in request.POST:  # from the confirmation: change them again
        return render_page(request, "approvals/inbox/edit.html", context)
    edited = form.arguments()
    if "confirmed" not in request.POST:
        try:
            with selectors.inbox_scope(approval.agency_id):
                approval_check_edit(approval=approval, arguments=edited)
        except ApplicationError as exc:
            return _refused_edit(request, form, context, exc)
        context["changes"] = _changes(approval.proposed_arguments or {}, edited, form.schema)
        context["raw_edited"] = json.dumps(edited, indent=2, ensure_ascii=False)
        return render_page(request, "approvals/inbox/edit_confirm.html", context)
    response, error = _decide(request, approval, approve=True, edited_arguments=edited)
    if response is not None:
        return response
    if error is not None:
        return _refused_edit(request, form, context, error)
    messages.success(request, f"Approved with your changes: {selectors.action_in_words(approval)}.")
    return redirect("approvals_inbox:list")
