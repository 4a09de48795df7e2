"""Responses for API paths that match no endpoint."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.urls import Resolver404, resolve
from django.views.decorators.csrf import csrf_exempt


@csrf_exempt  # answers 404 to every method; nothing to protect
def api_not_found(request: HttpRequest) -> JsonResponse:
    message = "No such API endpoint."
    if not request.path.endswith("/"):
        try:
            match = resolve(request.path + "/")
        except Resolver404:
            match = None
        if match is not None and match.func is not api_not_found:
            message += f" Did you mean {request.path}/ ?"
    body = {"message": message, "code": "not_found", "extra": {}}
    return JsonResponse(body, status=404)
