"""The receiving end of a webhook: ``POST /api/v1/webhooks/<id>/``. Not a DRF view: no
credential but the signature (so no CSRF either), and the body is read by the receiver itself,
bounded, after the checks that need no body."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from core.api.exceptions import error_body
from webhooks.receive import webhook_receive


@csrf_exempt
def receive(request: HttpRequest, webhook_id: str) -> JsonResponse:
    if request.method != "POST":
        response = JsonResponse(
            error_body("method_not_allowed", f"Method {request.method} not allowed; POST."),
            status=405,
        )
        response["Allow"] = "POST"
        return response
    result = webhook_receive(
        webhook_id=webhook_id,
        headers=request.headers,
        content_length=request.META.get("CONTENT_LENGTH"),
        read=request.read,
    )
    response = JsonResponse(result.body, status=result.status)
    for name, value in result.headers.items():
        response[name] = value
    return response
