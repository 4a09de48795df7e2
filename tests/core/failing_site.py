"""The platform's URLs plus one page that fails, for the error page tests (test_error_pages.py):
Django looks the error handlers up on the root URLconf, so they are the platform's."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.urls import path

from config.urls import handler400, handler403, handler404, handler500, urlpatterns

FAILING_PATH = "/test-only/fails/"


def fails(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("a page that fails, on purpose")


urlpatterns = [path(FAILING_PATH.strip("/") + "/", fails), *urlpatterns]
__all__ = ["handler400", "handler403", "handler404", "handler500", "urlpatterns"]
