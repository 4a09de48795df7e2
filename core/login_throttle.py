"""The page a login refused for too many failures answers with (django-axes'
``AXES_LOCKOUT_CALLABLE``): the admin's login look, 429, and ``Retry-After`` the seconds until
the cool-off ends. Which failures count and for how long: the ``AXES_*`` settings."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from axes.handlers.proxy import AxesProxyHandler
from axes.helpers import get_cool_off
from django.contrib import admin
from django.db.models import Max
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone

TEMPLATE = "admin/login_locked_out.html"


def lockout_response(
    request: HttpRequest, original_response: Any = None, credentials: Any = None
) -> HttpResponse:
    # axes 8.3.1's async middleware passes the credentials where the original response goes;
    # neither is needed: the attempts are found from the request (its address and login form).
    until = _locked_until(request)
    seconds = 1
    if until is not None:
        seconds = max(1, math.ceil((until - timezone.now()).total_seconds()))
    context = {
        **admin.site.each_context(request),
        "title": "Too many failed logins",
        "until": until,
        "minutes": max(1, math.ceil(seconds / 60)),
        "login_url": reverse("admin:login"),
    }
    response = TemplateResponse(request, TEMPLATE, context, status=429)
    response["Retry-After"] = str(seconds)
    return response.render()


def _locked_until(request: HttpRequest) -> datetime | None:
    """When the newest counted failure of this account or address leaves the cool-off."""
    cool_off = get_cool_off(request)
    if cool_off is None:
        return None
    handler = AxesProxyHandler.get_implementation()
    latest = [
        attempts.aggregate(latest=Max("attempt_time"))["latest"]
        for attempts in handler.get_user_attempts(request, None)
    ]
    found = [moment for moment in latest if moment is not None]
    return max(found) + cool_off if found else None
