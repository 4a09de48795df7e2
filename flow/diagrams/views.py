"""A run's diagrams on its admin page, and their text as ``.mmd`` downloads (staff of the run's
agency only: the views sit behind the execution admin, whose queryset is the agency's)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.safestring import SafeString

from agents.models import Execution
from flow.diagrams.mermaid import sequence_diagram, state_diagram
from flow.diagrams.records import FlowRecord, flow_record

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

KINDS = {"sequence": "Sequence diagram", "state": "State diagram"}


def diagram_text(record: FlowRecord, kind: str) -> str:
    if kind == "sequence":
        return sequence_diagram(record)
    if kind == "state":
        return state_diagram(record.transitions)
    raise ValueError(f"Unknown diagram kind {kind!r}.")


def diagrams_panel(execution: Execution, *, can_replay: bool) -> SafeString:
    """The run's sequence and state diagrams (drawn in the browser), with download links."""
    record = flow_record(execution)
    diagrams = [
        {
            "kind": kind,
            "title": title,
            "text": diagram_text(record, kind),
            "script_id": f"flow-diagram-{kind}",
            "download_url": reverse("admin:agents_execution_diagram", args=[execution.pk, kind]),
        }
        for kind, title in KINDS.items()
    ]
    replay_url = (
        reverse("admin:agents_execution_replay", args=[execution.pk])
        if can_replay and execution.is_terminal
        else ""
    )
    context = {"diagrams": diagrams, "replay_url": replay_url}
    return SafeString(render_to_string("flow/diagrams/panel.html", context))


def viewable_execution(
    model_admin: ModelAdmin[Any], request: HttpRequest, object_id: str
) -> Execution:
    """The run, through the admin's agency-scoped queryset: another agency's is a 404."""
    if not model_admin.has_view_permission(request):
        raise PermissionDenied
    execution = model_admin.get_object(request, unquote(object_id))
    if execution is None:  # (the project's admins raise it themselves)
        raise Http404("No such execution.")
    return execution


def diagram_download(
    model_admin: ModelAdmin[Any], request: HttpRequest, object_id: str, kind: str
) -> HttpResponse:
    if kind not in KINDS:
        raise Http404("No such diagram.")
    execution = viewable_execution(model_admin, request, object_id)
    text = diagram_text(flow_record(execution), kind)
    response = HttpResponse(text, content_type="text/plain; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="run-{execution.pk}-{kind}.mmd"'
    response["X-Content-Type-Options"] = "nosniff"
    return response
