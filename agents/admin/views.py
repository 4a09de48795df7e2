"""Admin pages beyond the change form: create an agent from a template, run an agent now."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db.models import Q
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.utils.html import format_html

from agents.admin.common import admin_url, link
from agents.admin.forms import FromTemplateForm, RunForm, add_application_error
from agents.models import Agent, AgentTemplate, Execution, TriggerType
from agents.services import agent_create_from_template, execution_create, skipped_trigger
from core.admin_scoping import request_agency
from core.exceptions import ApplicationError
from core.models import Site

if TYPE_CHECKING:
    from agents.admin.agent import AgentAdmin


def _context(model_admin: AgentAdmin, request: HttpRequest, **extra: Any) -> dict[str, Any]:
    return {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.opts,
        "app_label": model_admin.opts.app_label,
        **extra,
    }


def from_template(model_admin: AgentAdmin, request: HttpRequest) -> HttpResponse:
    """Pick a template (the agency's or a platform one) and a site; the agent starts inactive."""
    if not model_admin.has_add_permission(request):
        raise PermissionDenied
    agency = request_agency(request)
    templates = AgentTemplate.objects.all()
    sites = Site.objects.filter(is_active=True)
    if agency is not None:
        templates = templates.filter(Q(agency=agency) | Q(agency__isnull=True))
        sites = sites.filter(agency=agency)
    form = FromTemplateForm(request.POST or None, initial={"template": request.GET.get("template")})
    form.fields["template"].queryset = templates  # type: ignore[attr-defined]
    form.fields["site"].queryset = sites  # type: ignore[attr-defined]
    if request.method == "POST" and form.is_valid():
        template, site = form.cleaned_data["template"], form.cleaned_data["site"]
        if template.agency_id not in (None, site.agency_id):
            form.add_error("template", "This template belongs to another agency.")
        else:
            overrides = {k: form.cleaned_data[k] for k in ("name", "slug") if form.cleaned_data[k]}
            try:
                agent = agent_create_from_template(
                    template=template,
                    agency_id=site.agency_id,
                    site=site,
                    user_id=request.user.pk,
                    **overrides,
                )
            except ApplicationError as exc:
                add_application_error(form, exc)
            else:
                model_admin.log_addition(request, agent, [{"added": {}}])
                model_admin.message_user(
                    request,
                    format_html("Created {} from {} (inactive).", link(agent), template.name),
                    messages.SUCCESS,
                )
                return HttpResponseRedirect(admin_url(agent))
    context = _context(
        model_admin, request, title="Add agent from template", form=form, media=form.media
    )
    return TemplateResponse(request, "admin/agents/agent/from_template.html", context)


def start_run(
    model_admin: AgentAdmin, request: HttpRequest, agent: Agent, *, instruction: str
) -> Execution | None:
    """A manual run; an inactive or rate-limited agent is skipped (and the trigger logged)."""
    execution = execution_create(
        agent=agent,
        trigger_type=TriggerType.MANUAL,
        input=instruction,
        triggered_by_id=request.user.pk,
    )
    if execution is None:
        log = skipped_trigger(agent)
        reason = log.skip_detail if log else "it was skipped"
        model_admin.message_user(
            request,
            f"{agent.name} was not started: {reason} (see the trigger log).",
            messages.WARNING,
        )
    else:
        model_admin.message_user(
            request,
            format_html("Started {} for {}.", link(execution, "an execution"), agent.name),
            messages.SUCCESS,
        )
    return execution


def run(model_admin: AgentAdmin, request: HttpRequest, object_id: str) -> HttpResponse:
    agent = model_admin.get_object(request, object_id)  # 404 for another agency's agent
    if not model_admin.has_run_permission(request):
        raise PermissionDenied
    form = RunForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        execution = start_run(model_admin, request, agent, instruction=form.cleaned_data["input"])
        return HttpResponseRedirect(admin_url(execution) if execution else admin_url(agent))
    context = _context(
        model_admin, request, title=f"Run {agent.name} now", form=form, original=agent
    )
    return TemplateResponse(request, "admin/agents/agent/run.html", context)
