"""The run page's replay and retry pages (behind the execution admin: staff of the run's agency,
through its agency-scoped queryset, so another agency's run is a 404)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    HttpResponseNotAllowed,
    HttpResponseRedirect,
)
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse

from agents.admin.panels import STEP_PLACEHOLDER, StepAction
from agents.models import Execution, StepType
from core.exceptions import ApplicationError
from flow.diagrams.views import diagram_download, viewable_execution
from flow.replay.engine import replay_execution
from flow.replay.retry import execution_retry_from

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin


def _run_url(execution_id: Any) -> str:
    return reverse("admin:agents_execution_change", args=[execution_id])


def _context(model_admin: ModelAdmin[Any], request: HttpRequest, **extra: Any) -> dict[str, Any]:
    return {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.opts,
        "app_label": model_admin.opts.app_label,
        **extra,
    }


def replay(model_admin: ModelAdmin[Any], request: HttpRequest, object_id: str) -> HttpResponse:
    """The dry replay's report (synchronous: it reads the run's rows and decides each recorded
    call again, nothing runs)."""
    execution = viewable_execution(model_admin, request, object_id)
    try:
        report = replay_execution(execution)
    except ApplicationError as exc:
        model_admin.message_user(request, exc.message, messages.WARNING)
        return HttpResponseRedirect(_run_url(execution.pk))
    context = _context(
        model_admin,
        request,
        title=f"Replay (dry) of run {execution.pk}",
        original=execution,
        report=report,
        run_url=_run_url(execution.pk),
    )
    return TemplateResponse(request, "flow/replay/report.html", context)


def retry(
    model_admin: ModelAdmin[Any], request: HttpRequest, object_id: str, step: str
) -> HttpResponse:
    """GET: what retrying from step ``step`` does, and the confirm button. POST: start it and
    open the new run."""
    if request.method not in ("GET", "POST"):
        return HttpResponseNotAllowed(["GET", "POST"])
    execution = viewable_execution(model_admin, request, object_id)
    if not model_admin._can_write(request):  # type: ignore[attr-defined]
        raise PermissionDenied
    if not (step.isascii() and step.isdigit()):
        raise Http404("No such step.")
    number = int(step)
    picked = execution.steps.filter(step_number=number).first()
    if picked is None:
        raise Http404("No such step.")
    if request.method == "POST":
        try:
            new = execution_retry_from(
                execution=execution, step_number=number, triggered_by_id=request.user.pk
            )
        except ApplicationError as exc:
            return HttpResponseBadRequest(exc.message)
        model_admin.log_addition(request, new, f"Retry of run {execution.pk} from step {number}.")
        model_admin.message_user(
            request,
            f"Started run {new.pk}: a retry of this run from step {number}.",
            messages.SUCCESS,
        )
        return HttpResponseRedirect(_run_url(new.pk))
    context = _context(
        model_admin,
        request,
        title=f"Retry run {execution.pk} from step {number}?",
        original=execution,
        step=picked,
        earlier=execution.steps.filter(step_number__lte=number).count(),
        later=execution.steps.filter(step_number__gt=number).count(),
        ended=execution.is_terminal,
        run_url=_run_url(execution.pk),
    )
    return TemplateResponse(request, "flow/replay/retry_confirm.html", context)


def retry_url(execution: Execution) -> str:
    """The retry's confirmation page of ``execution``, its step number left to the timeline."""
    return reverse("admin:agents_execution_retry", args=[execution.pk, STEP_PLACEHOLDER])


# "Retry from here" on the run page's timeline. A retry keeps the run's history up to the step
# and goes on from there, so it makes sense on every step but the first: step 1 is the observe of
# the trigger, and a retry from it keeps nothing (it would be the same run started again). Only
# for an ended run (execution_retry_from refuses one still going) and a member who may write.
RETRY_ACTION = StepAction(
    order=10,
    name="retry",
    label="Retry from here",
    url=retry_url,
    step_types=frozenset(StepType.values),
    ended_only=True,
    first_step=False,
    needs_write=True,
)


def run_urls(model_admin: ModelAdmin[Any]) -> list[URLPattern]:
    """The run page's diagram downloads, replay and retry (``admin:agents_execution_*``)."""
    wrap = model_admin.admin_site.admin_view

    def bound(view: Any) -> Any:
        return wrap(lambda request, *args, **kwargs: view(model_admin, request, *args, **kwargs))

    return [
        path(
            "<path:object_id>/diagram/<str:kind>.mmd",
            bound(diagram_download),
            name="agents_execution_diagram",
        ),
        path("<path:object_id>/replay/", bound(replay), name="agents_execution_replay"),
        path(
            "<path:object_id>/retry/<str:step>/",
            bound(retry),
            name="agents_execution_retry",
        ),
    ]
