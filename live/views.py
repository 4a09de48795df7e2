"""The staff home: the admin index (unfold's ``DASHBOARD_CALLBACK``), its panels as htmx
fragments that the page reloads when the agency's websocket reports a status change (and every
30 s), the site root that leads to it, and the navigation badge of what waits for a person.

The agency is the member's own (core.middleware); a superuser, who belongs to none, picks one
(``?agency=<id>``, remembered in the session). Everything is read through :mod:`live.home`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from core.admin_scoping import request_membership
from core.api.permissions import APPROVE_ROLES
from core.models import Agency, Role
from evals.home import canary_panel
from flow.home import stuck_panel
from live import home
from usage.charts import usage_charts

SESSION_AGENCY = "live_home_agency"
# Who may decide approvals and answer questions: they get the inbox's links.
DECIDE_ROLES = APPROVE_ROLES


def _agency_by_id(value: str) -> Agency | None:
    try:
        return Agency.objects.filter(pk=uuid.UUID(value)).first()
    except (ValueError, ValidationError):
        return None


def home_agency(request: HttpRequest, *, remember: bool = True) -> Agency | None:
    """The agency the home shows: the member's own, never one named in the request; for a
    superuser, the one picked with ``?agency=<id>`` (``?agency=`` forgets it). ``remember``: the
    page keeps the pick in the session; fragments name their agency every time."""
    membership = request_membership(request)
    if membership is not None:
        return membership.agency
    if not request.user.is_superuser:
        return None
    if "agency" in request.GET:
        agency = _agency_by_id(request.GET["agency"])
        if remember and agency is None:
            request.session.pop(SESSION_AGENCY, None)
        elif remember and agency is not None:
            request.session[SESSION_AGENCY] = str(agency.pk)
        return agency
    remembered = request.session.get(SESSION_AGENCY) if remember else None
    return _agency_by_id(remembered) if remembered else None


def _viewer(request: HttpRequest) -> dict[str, Any]:
    membership = request_membership(request)
    role = membership.role if membership is not None else None
    return {
        "role": role,
        "can_decide": request.user.is_superuser or role in DECIDE_ROLES,
        # An approver comes for the queue: it is the first thing on their home.
        "waiting_first": role == Role.APPROVER,
    }


# --- panels: one context builder per fragment, used by the page and by the fragment views ----


def _summary(agency: Agency) -> dict[str, Any]:
    return {
        "in_progress_count": home.count_in_progress(agency=agency),
        "waiting": home.waiting_counts(agency=agency),
        "spend": home.spend_today(agency=agency),
    }


def _in_progress(agency: Agency) -> dict[str, Any]:
    return {
        "runs": home.runs_in_progress(agency=agency),
        "in_progress_count": home.count_in_progress(agency=agency),
    }


def _waiting(agency: Agency) -> dict[str, Any]:
    return {
        "approvals": home.pending_approvals(agency=agency),
        "questions": home.open_questions(agency=agency),
        "waiting": home.waiting_counts(agency=agency),
    }


def _recent(agency: Agency) -> dict[str, Any]:
    return {"recent": home.recent_finished(agency=agency)}


def _charts(agency: Agency) -> dict[str, Any]:
    return {"charts": usage_charts(home.usage_days(agency=agency))}


def _success(agency: Agency) -> dict[str, Any]:
    return {
        "success_rates": home.agent_success_rates(agency=agency),
        "success_rate_days": home.SUCCESS_RATE_DAYS,
    }


PANELS: dict[str, Callable[[Agency], dict[str, Any]]] = {
    "summary": _summary,
    "in_progress": _in_progress,
    "waiting": _waiting,
    "recent": _recent,
    "stuck": stuck_panel,  # flow/home.py: runs flagged as stuck (flow/templates/live/home/)
    "canaries": canary_panel,  # evals/home.py: running canaries' figures (evals/templates/)
    # A run that ends changes the day's usage and its agent's success rate: these reload too.
    "charts": _charts,
    "success": _success,
}


def _panel_url(name: str, agency: Agency, request: HttpRequest) -> str:
    url = reverse("live:home-panel", args=[name])
    # A superuser's fragments name the agency: the session may pick another in another tab.
    return f"{url}?agency={agency.pk}" if request_membership(request) is None else url


def home_context(request: HttpRequest, agency: Agency) -> dict[str, Any]:
    with home.home_scope(agency):
        context: dict[str, Any] = {}
        for build in PANELS.values():
            context.update(build(agency))
    socket = "/ws/agency/"
    if request_membership(request) is None:
        socket = f"{socket}?agency={agency.pk}"
    return {
        **context,
        **_viewer(request),
        "agency": agency,
        "panel_urls": {name: _panel_url(name, agency, request) for name in PANELS},
        "live_socket_path": socket,
    }


def dashboard_callback(request: HttpRequest, context: dict[str, Any]) -> dict[str, Any]:
    """unfold's DASHBOARD_CALLBACK: the admin index becomes the staff home."""
    agency = home_agency(request)
    context["title"] = "Home"
    context["home_agency"] = agency
    if agency is not None:
        context.update(home_context(request, agency))
    elif request.user.is_superuser:
        context["home_agencies"] = list(Agency.objects.filter(is_active=True).order_by("name"))
    return context


@require_GET
def home_panel(request: HttpRequest, name: str) -> HttpResponse:
    """One panel of the home, re-rendered (live/urls.py puts it behind the admin's login)."""
    build = PANELS.get(name)
    if build is None:
        raise Http404("No such panel.")
    agency = home_agency(request, remember=False)
    if agency is None:
        raise Http404("No agency.")
    with home.home_scope(agency):
        context = build(agency)
    context.update(_viewer(request), agency=agency)
    response = render(request, f"live/home/_{name}.html", context)
    response["X-Home-Panel"] = name  # what the page's script swaps in (live/static/live/home.js)
    return response


def site_root(request: HttpRequest) -> HttpResponse:
    """The site's root ("View site" in the admin) is the staff home."""
    return HttpResponseRedirect(reverse("admin:index"))


def waiting_badge(request: HttpRequest) -> str | None:
    """For unfold's SIDEBAR navigation ``badge``: pending approvals and open questions of the
    user's agency (nothing shown when none wait); a superuser's, of the agency their home shows."""
    membership = request_membership(request)
    agency = membership.agency if membership is not None else None
    if agency is None and request.user.is_superuser:
        remembered = request.session.get(SESSION_AGENCY)
        agency = _agency_by_id(remembered) if remembered else None
    if agency is None:
        return None
    with home.home_scope(agency):
        total = home.waiting_counts(agency=agency).total
    return str(total) if total else None


def waiting_count(request: HttpRequest) -> JsonResponse:
    """What the sidebar badge shows, for the page's script to update it live
    (live/static/live/notifications.js)."""
    response = JsonResponse({"count": int(waiting_badge(request) or 0)})
    response["Cache-Control"] = "no-store"
    return response
