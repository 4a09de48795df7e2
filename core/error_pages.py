"""The pages Django answers with when a page is missing, refused or fails (``handler400`` ...
``handler500`` in config/urls.py): the admin's look, nothing of the internals. With
``DJANGO_DEBUG`` set explicitly, Django shows its debug pages instead (README "Error pages").

They are built without the database and without the user: a 500 may come from a lost database
or an aborted transaction, and a missing page must not depend on the session.
"""

from __future__ import annotations

import logging
from typing import Any, cast

from django.conf import settings
from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.middleware.csrf import REASON_NO_CSRF_COOKIE
from django.template import loader
from django.views import csrf

logger = logging.getLogger(__name__)

# status (or another page's name): (template, page title)
PAGES: dict[int | str, tuple[str, str]] = {
    400: ("400.html", "Bad request"),
    403: ("403.html", "Not allowed"),
    # Not 403_csrf.html: Django's own CSRF page (with DEBUG) would render that one.
    "csrf": ("errors/csrf.html", "Form expired"),
    404: ("404.html", "Page not found"),
    500: ("500.html", "Something went wrong"),
}
FALLBACK = "<!doctype html><title>{title}</title><h1>{title}</h1><p><a href='/'>AgentDesk</a></p>"


def _theme(request: HttpRequest) -> dict[str, Any]:
    """What unfold's layout reads (title, colours, favicon), without ``each_context``: that one
    lists the user's apps and agency, which takes the database."""
    site = cast(Any, admin.site)  # unfold's UnfoldAdminSite (the stubs know AdminSite only)
    return {
        "site_title": site._get_config("SITE_TITLE", request),
        "site_url": site._get_config("SITE_URL", request),
        "site_favicons": site._get_favicons("SITE_FAVICONS", request),
        "colors": site._get_colors("COLORS", request),
        "border_radius": site._get_config("BORDER_RADIUS", request),
        "theme": site._get_config("THEME", request),
    }


def _page(
    request: HttpRequest, status: int, *, page: int | str | None = None, **context: Any
) -> HttpResponse:
    template, title = PAGES[status if page is None else page]
    try:
        body = loader.get_template(template).render(
            {**_theme(request), "title": title, "status": status, **context}
        )
    except Exception:  # the page about an error must not fail itself: a bare one instead
        logger.exception("The %s page could not be rendered", status)
        body = FALLBACK.format(title=title)
    return HttpResponse(body, status=status)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    return _page(request, 400)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    return _page(request, 403)


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    return _page(request, 404, path=request.path)


def server_error(request: HttpRequest) -> HttpResponse:
    return _page(request, 500)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """``CSRF_FAILURE_VIEW``: a form sent without a valid CSRF token (opened too long ago, in
    another session, from another site) is a 403 in the admin's look that says what to do;
    Django's own page, which explains CSRF to a developer, with ``DJANGO_DEBUG`` only."""
    if settings.DEBUG:
        return csrf.csrf_failure(request, reason)
    # Django has logged it already (django.security.csrf).
    return _page(request, 403, page="csrf", no_cookie=reason == REASON_NO_CSRF_COOKIE)
