"""One question (an agent's question, or a correction after repeated failures): its page, and
the response: an option, a typed answer or hint, or stopping the run (with a confirmation)."""

from __future__ import annotations

import uuid

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_POST

from approvals.inbox import selectors
from approvals.inbox.forms import AnswerForm
from approvals.inbox.views.common import can_decide, render_page, require_decider
from approvals.models import Question, QuestionKind, QuestionStatus
from approvals.questions import question_answer
from core.admin_scoping import is_member, request_agency
from core.exceptions import ApplicationError

# --- one question --------------------------------------------------------------------------------


def _question(request: HttpRequest, question_id: uuid.UUID) -> Question:
    if not is_member(request):
        raise Http404("No question matches the given query.")
    return selectors.access_question(agency=request_agency(request), id=question_id)


def _question_outcome(question: Question) -> dict[str, str] | None:
    who = str(question.responded_by) if question.responded_by_id else "someone"
    if question.status == QuestionStatus.ANSWERED:
        verb = "Hint given" if question.kind == QuestionKind.CORRECTION else "Answered"
        return {"variant": "success", "headline": f"{verb} by {who}", "detail": ""}
    if question.status == QuestionStatus.SKIPPED:
        return {
            "variant": "danger",
            "headline": f"Run stopped by {who}",
            "detail": question.resolution_action,
        }
    if question.status == QuestionStatus.TIMED_OUT:
        return {
            "variant": "warning",
            "headline": "Expired",
            "detail": "Nobody answered in time: the run ended.",
        }
    if question.status == QuestionStatus.CANCELLED:
        return {
            "variant": "default",
            "headline": "Cancelled",
            "detail": "The run ended before anyone answered.",
        }
    return None


def _question_page(
    request: HttpRequest,
    question: Question,
    *,
    status: int = 200,
    banner: str = "",
    form: AnswerForm | None = None,
    error: str = "",
    template: str = "approvals/inbox/question.html",
) -> HttpResponse:
    with selectors.inbox_scope(question.agency_id):
        run = selectors.run_context(question.execution)
    pending = question.status == QuestionStatus.PENDING
    correction = question.kind == QuestionKind.CORRECTION
    context = {
        "title": "Help needed" if correction else "Question",
        "item": question,
        "correction": correction,
        "failures": selectors.failed_calls_of_correction(question) if correction else [],
        "failed_tool": question.context.get("tool", "")
        if isinstance(question.context, dict)
        else "",
        "options": [str(option) for option in question.options or []],
        "free_text": question.allow_other or not question.options,
        "run": run,
        "pending": pending,
        "can_decide": can_decide(request) and pending,
        "outcome": _question_outcome(question),
        "expires_in": selectors.expires_in(question.expires_at),
        "banner": banner,
        "error": error,
        "form": form or AnswerForm(auto_id="answer_%s"),
    }
    return render_page(request, template, context, status=status)


@require_GET
def question_detail(request: HttpRequest, question_id: uuid.UUID) -> HttpResponse:
    return _question_page(request, _question(request, question_id))


@require_POST
def question_respond(request: HttpRequest, question_id: uuid.UUID) -> HttpResponse:
    """An option tapped (``answer``), a typed answer or hint (``text``), or ``stop`` (which asks
    for confirmation first)."""
    question = _question(request, question_id)
    require_decider(request)
    stop = request.POST.get("action") == "stop"
    form = AnswerForm(auto_id="answer_%s")
    answer = ""
    if stop:
        if "confirmed" not in request.POST:
            return _question_page(request, question, template="approvals/inbox/stop_confirm.html")
    elif "answer" in request.POST and "text" not in request.POST:
        answer = request.POST["answer"]  # an option's button
    else:
        form = AnswerForm({"answer": request.POST.get("text", "")}, auto_id="answer_%s")
        if not form.is_valid():
            return _question_page(request, question, status=400, form=form)
        answer = form.cleaned_data["answer"]
    try:
        with selectors.inbox_scope(question.agency_id):
            question_answer(question=question, answer=answer, user_id=request.user.pk, stop=stop)
    except ApplicationError as exc:
        if exc.code == "already_answered":
            fresh = _question(request, question.pk)
            outcome = _question_outcome(fresh)
            headline = outcome["headline"] if outcome else fresh.get_status_display()
            banner = f"Already settled: {headline}. Your answer was not sent."
            return _question_page(request, fresh, status=409, banner=banner)
        # The answer is refused (not an option, too long): said above the forms.
        return _question_page(request, question, status=400, form=form, error=exc.message)
    if stop:
        messages.success(request, "The run was stopped.")
    elif question.kind == QuestionKind.CORRECTION:
        messages.success(request, "Hint sent: the run tries again.")
    else:
        messages.success(request, "Answer sent: the run goes on.")
    return redirect("approvals_inbox:list")
