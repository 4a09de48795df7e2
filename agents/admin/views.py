"""Admin pages beyond the change form: create an agent from a template, run an agent now (or
"try it" from its page), and the live preview of the tools an agent's patterns allow."""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Q
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html

from agents.admin.agent_panels import render_tool_preview
from agents.admin.common import admin_url, link
from agents.admin.forms import FromTemplateForm, RunForm, add_application_error
from agents.models import Agent, AgentTemplate, Execution, TriggerType
from agents.services import agent_create_from_template, execution_create, skipped_trigger
from core.admin_scoping import request_agency
from core.exceptions import ApplicationError
from core.models import Agency, Site
from tools.patterns import InvalidPattern, validate_pattern

if TYPE_CHECKING:
    # The agent admin calls these views with itself; typed by its base class, which keeps
    # this module below agents.admin.agent.
    from core.admin_scoping import AgencyScopedAdmin as AgentAdmin


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


def may_run(model_admin: AgentAdmin, request: HttpRequest) -> bool:
    """Running an agent by hand: allowed to whoever may change it."""
    return model_admin.has_change_permission(request)


def run(model_admin: AgentAdmin, request: HttpRequest, object_id: str) -> HttpResponse:
    agent = model_admin.get_object(request, object_id)  # 404 for another agency's agent
    if not may_run(model_admin, request):
        raise PermissionDenied
    form = RunForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        execution = start_run(model_admin, request, agent, instruction=form.cleaned_data["input"])
        return HttpResponseRedirect(admin_url(execution) if execution else admin_url(agent))
    context = _context(
        model_admin, request, title=f"Run {agent.name} now", form=form, original=agent
    )
    return TemplateResponse(request, "admin/agents/agent/run.html", context)


def try_it(
    model_admin: AgentAdmin, request: HttpRequest, object_id: str, *, instruction: str
) -> HttpResponse:
    """The "Try it" dialog's submit (unfold's action has checked the run permission): start a
    manual run and open its page, where it can be watched. The dialog posts with htmx, which
    follows ``HX-Redirect``; a plain post gets a redirect."""
    agent = model_admin.get_object(request, object_id)  # 404 for another agency's agent
    execution = start_run(model_admin, request, agent, instruction=instruction)
    url = admin_url(execution or agent)
    if request.headers.get("HX-Request"):
        return HttpResponse(headers={"HX-Redirect": url})
    return HttpResponseRedirect(url)


def try_it_opened(model_admin: AgentAdmin, request: HttpRequest, object_id: str) -> HttpResponse:
    """The "Try it" dialog's URL. Its form is a fragment the agent page loads into its dialog
    (htmx); opened on its own (a new tab, a bookmark, the address copied) it was that fragment
    alone, with no page around it and no style: such a visit gets the "Run now" page, the same
    form in a page of its own. The dialog's requests go on to unfold's action."""
    if not may_run(model_admin, request):
        raise PermissionDenied
    if request.method == "GET" and not request.headers.get("HX-Request"):
        return HttpResponseRedirect(reverse("admin:agents_agent_run", args=[object_id]))
    return model_admin.try_it(request, object_id=object_id)


def _typed_patterns(label: str, text: str, errors: list[str]) -> list[str]:
    """The patterns of a comma-separated field as typed; a malformed one is reported (the form
    refuses it on save) and left out."""
    patterns = []
    for pattern in (p.strip() for p in text.split(",")):
        if not pattern:
            continue
        try:
            validate_pattern(pattern)
        except InvalidPattern as exc:
            errors.append(f"{label}: {exc.message}")
        else:
            patterns.append(pattern)
    return patterns


def _typed_constraints(text: str) -> list[Any]:
    try:
        constraints = json.loads(text) if text.strip() else []
    except ValueError:
        return []  # the form says what is wrong on save; the preview goes without them
    return constraints if isinstance(constraints, list) else []


def _preview_agency(request: HttpRequest) -> Agency | None:
    """The member's agency (never one named in the request); a superuser's, the one picked on
    the form or the agent's."""
    agency = request_agency(request)
    if agency is not None or not request.user.is_superuser:
        return agency
    try:
        return Agency.objects.filter(pk=uuid.UUID(request.GET.get("agency", ""))).first()
    except (ValueError, ValidationError):
        return None


def tool_preview(model_admin: AgentAdmin, request: HttpRequest) -> HttpResponse:
    """An HTML fragment: the tools an agent with the typed patterns would be offered."""
    if not model_admin.has_view_permission(request):
        raise PermissionDenied
    agency = _preview_agency(request)
    if agency is None:
        return HttpResponse("<p>Pick the agency first: the preview lists its tools.</p>")
    errors: list[str] = []
    allowed = _typed_patterns("Allowed tools", request.GET.get("allowed_tools", ""), errors)
    denied = _typed_patterns("Denied tools", request.GET.get("denied_tools", ""), errors)
    fragment = render_tool_preview(
        agency.pk,
        allowed=allowed,
        denied=denied,
        constraints=_typed_constraints(request.GET.get("constraints", "")),
        basis="patterns as typed, not saved yet",
        errors=errors,
    )
    return HttpResponse(fragment)
