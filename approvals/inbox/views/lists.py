"""The inbox's list (what waits, or what was decided lately), the fragment its live refresh
swaps in, and the admin index that sends an approver on to the inbox."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.views.decorators.http import require_GET

from approvals.inbox import selectors
from approvals.inbox.views.common import agency_query, can_decide, render_page
from core.admin_scoping import is_member, request_membership
from core.models import Agency, Role
from core.notices import notices
from live.views import home_agency

LIST_HEADER = "X-Inbox-List"  # marks the list fragment (inbox.js swaps in nothing else)


# --- the list ------------------------------------------------------------------------------------


def _show(request: HttpRequest) -> str:
    return "decided" if request.GET.get("show") == "decided" else "waiting"


def _only(request: HttpRequest) -> str:
    """The waiting list's chip: one risk level, or questions; "" for everything."""
    value = request.GET.get("only", "")
    return value if value in selectors.CHIP_VALUES else ""


def _list_context(request: HttpRequest, agency: Agency, show: str) -> dict[str, Any]:
    only = _only(request) if show == "waiting" else ""
    with selectors.inbox_scope(agency.pk):
        counts = selectors.pending_counts(agency=agency)
        if show == "decided":
            items = selectors.decided_items(agency=agency)
        else:
            items = selectors.pending_items(agency=agency)
    chips = selectors.chips(items) if show == "waiting" else []
    shown = [item for item in items if selectors.in_chip(item, only)]
    query = agency_query(request, agency)
    partial = reverse("approvals_inbox:list-partial") + f"?show={show}"
    partial += f"&only={only}" if only else ""
    return {
        "agency": agency,
        "items": shown,
        "counts": counts,
        "show": show,
        "only": only,
        "chips": chips,
        "more_waiting": show == "waiting" and not only and counts.total > len(items),
        "partial_url": f"{partial}&{query}" if query else partial,
        "agency_query": query,
        "can_decide": can_decide(request),
        "bulk_ready": can_decide(request) and any(item.bulk_approvable for item in shown),
    }


@require_GET
def inbox(request: HttpRequest) -> HttpResponse:
    """What waits for me (``?show=decided``: what was settled lately)."""
    agency = home_agency(request) if is_member(request) else None
    context: dict[str, Any] = {"title": "Inbox", "agency": agency}
    if agency is None:
        if request.user.is_superuser:
            context["agencies"] = list(Agency.objects.filter(is_active=True).order_by("name"))
        return render_page(request, "approvals/inbox/no_agency.html", context)
    context.update(_list_context(request, agency, _show(request)))
    with selectors.inbox_scope(agency.pk):
        context["notices"] = notices(agency.pk)  # what asks no decision (core/notices.py)
    query = agency_query(request, agency)
    context["live_socket_path"] = "/ws/agency/" + (f"?{query}" if query else "")
    return render_page(request, "approvals/inbox/list.html", context)


@require_GET
def list_partial(request: HttpRequest) -> HttpResponse:
    """The list alone, for the page's live refresh."""
    agency = home_agency(request, remember=False) if is_member(request) else None
    if agency is None:
        raise Http404("No agency.")
    context = _list_context(request, agency, _show(request))
    context["oob"] = True  # the tab's count is swapped in too
    response = TemplateResponse(request, "approvals/inbox/_list.html", context)
    response[LIST_HEADER] = str(context["counts"].total)
    return response


# --- where an approver lands -------------------------------------------------------------------


def admin_index(request: HttpRequest) -> HttpResponse:
    """The admin index, except that a member whose role is approver lands on the inbox (after
    logging in, from "View site"); ``?home`` shows them the staff home (the sidebar's Home)."""
    membership = request_membership(request)
    if membership is not None and membership.role == Role.APPROVER and "home" not in request.GET:
        return HttpResponseRedirect(reverse("approvals_inbox:list"))
    return admin.site.index(request)
