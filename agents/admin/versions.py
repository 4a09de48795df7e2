"""An agent's versions in the admin: the list (number, when, who, what changed, its runs), a
field-by-field diff between any two, and "Restore" (a confirmation page, then a POST that
applies the version through the agent services, as a new version). Everyone who may see the
agent sees its versions; restoring is an edit, for the roles that may edit agents."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import Count
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseNotAllowed,
    HttpResponseRedirect,
)
from django.template.response import TemplateResponse
from django.urls import reverse

from agents.admin.display import awaiting_gate
from agents.models import Agent, AgentVersion
from agents.services import agent_version_restore
from agents.services.versions import (
    access_agent_version,
    agent_versions,
    config_of,
    field_label,
    version_diff,
)
from core.exceptions import ApplicationError

if TYPE_CHECKING:
    # The agent admin calls these views with itself; typed by its base class, which keeps
    # this module below agents.admin.agent.
    from core.admin_scoping import AgencyScopedAdmin as AgentAdmin

PER_PAGE = 50


def versions_url(agent: Agent) -> str:
    return reverse("admin:agents_agent_versions", args=[agent.pk])


def _context(model_admin: AgentAdmin, request: HttpRequest, **extra: Any) -> dict[str, Any]:
    return {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.opts,
        "app_label": model_admin.opts.app_label,
        **extra,
    }


def _picked(request: HttpRequest, name: str, numbers: list[int], default: int | None) -> int | None:
    value = request.GET.get(name, "")
    if value.isascii() and value.isdigit() and int(value) in numbers:
        return int(value)
    return default


def _changed(version: AgentVersion) -> str:
    if version.number == 1 and not version.change_summary:
        return "Created"
    return ", ".join(field_label(name) for name in version.change_summary) or "-"


def versions(model_admin: AgentAdmin, request: HttpRequest, object_id: str) -> HttpResponse:
    """The list (``PER_PAGE`` a page, newest first), and the diff of the two versions picked
    (``?a=<n>&b=<n>``; by default the previous and the latest). Configurations are read for
    those two only."""
    agent = model_admin.get_object(request, object_id)  # 404 for another agency's agent
    if not model_admin.has_view_permission(request, agent):
        raise PermissionDenied
    all_versions = agent_versions(agent=agent)
    numbers = list(all_versions.values_list("number", flat=True))
    newer = _picked(request, "b", numbers, numbers[0] if numbers else None)
    older = _picked(request, "a", numbers, numbers[1] if len(numbers) > 1 else newer)
    diff = None
    if older is not None and newer is not None and older != newer:
        picked = all_versions.filter(number__in=[older, newer])
        configs = dict(picked.values_list("number", "config"))
        diff = version_diff(configs[older], configs[newer])
    page = Paginator(
        all_versions.defer("config").annotate(runs=Count("executions")), PER_PAGE
    ).get_page(request.GET.get("page"))
    table = [
        {
            "version": version,
            "current": version.pk == agent.current_version_id,
            "changed": _changed(version),
            "previous": version.number - 1 if version.number > 1 else None,
        }
        for version in page
    ]
    context = _context(
        model_admin,
        request,
        title=f"Versions of {agent.name}",
        original=agent,
        rows=table,
        page=page,
        numbers=numbers,
        older=older,
        newer=newer,
        diff=diff,
        can_restore=model_admin.has_change_permission(request, agent),
        agent_url=reverse("admin:agents_agent_change", args=[agent.pk]),
    )
    return TemplateResponse(request, "admin/agents/agent/versions.html", context)


def restore(
    model_admin: AgentAdmin, request: HttpRequest, object_id: str, number: str
) -> HttpResponse:
    """GET: what restoring version ``number`` would change, and the confirm button. POST: restore
    it (a new version); a version that is the agent's configuration already changes nothing."""
    if request.method not in ("GET", "POST"):
        return HttpResponseNotAllowed(["GET", "POST"])
    agent = model_admin.get_object(request, object_id)  # 404 for another agency's agent
    if not model_admin.has_change_permission(request, agent):
        raise PermissionDenied
    version = access_agent_version(agent=agent, number=number)
    if request.method == "POST":
        try:
            new = agent_version_restore(agent=agent, version=version, user_id=request.user.pk)
        except ApplicationError as exc:
            model_admin.message_user(request, exc.message, messages.WARNING)
            return HttpResponseRedirect(versions_url(agent))
        model_admin.log_change(
            request, agent, f"Restored version {version.number} as version {new.number}."
        )
        if new.pk != agent.current_version_id:  # a deploy gate holds it
            model_admin.message_user(request, awaiting_gate(new, agent), messages.WARNING)
            return HttpResponseRedirect(reverse("admin:agents_agent_change", args=[agent.pk]))
        model_admin.message_user(
            request,
            f"Restored version {version.number}: it is version {new.number} now.",
            messages.SUCCESS,
        )
        return HttpResponseRedirect(versions_url(agent))
    context = _context(
        model_admin,
        request,
        title=f"Restore version {version.number} of {agent.name}?",
        original=agent,
        version=version,
        diff=version_diff(config_of(agent), version.config),
        versions_url=versions_url(agent),
    )
    return TemplateResponse(request, "admin/agents/agent/version_restore.html", context)
