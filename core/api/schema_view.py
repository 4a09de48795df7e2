"""``/api/schema/``: drf-spectacular's schema view, generating the schema once per process.

The schema is the code's (its views, serializers and settings): the same for every request
(``SERVE_PUBLIC``: every endpoint, whoever asks) until the code changes, which is a new deploy
and a new process. Generating it took 0.3-2.5 s of a core each time (the API docs page fetches
it at every visit, and waited that long before it drew anything), so the first request of each
format generates it and later ones are answered from memory. A request naming a ``version`` or a
``lang`` is generated each time, as before (those values come from the request: caching each
would let anyone fill the memory). A changed setting (a test's override) forgets them.

drf-spectacular resolves its extensions' target classes (given as import paths) lazily, on a
first generation, by rewriting a class attribute that another thread may be reading: two
generations at once in a process that has made none yet (a web server just started, two people
opening the API docs) answer 500 with ``AttributeError: 'NoneType' object has no attribute
'startswith'`` (tfranzel/drf-spectacular#1122; found by the soak, bench/soak). So one
generation at a time per process; the others wait for it, and then find it generated.
"""

from __future__ import annotations

import threading
from typing import Any

from django.core.signals import setting_changed
from django.utils import translation
from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SpectacularAPIView
from rest_framework.request import Request
from rest_framework.response import Response

_generating = threading.Lock()
# (format, language) -> (the schema, its Content-Disposition header)
_generated: dict[tuple[str, str | None], tuple[Any, str]] = {}


def forget_generated(**kwargs: Any) -> None:
    _generated.clear()


setting_changed.connect(forget_generated, dispatch_uid="core.api.schema_view.forget_generated")


class SchemaView(SpectacularAPIView):
    @extend_schema(exclude=True)  # as the view it extends: the schema does not list itself
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        if "version" in request.GET or "lang" in request.GET:
            with _generating:
                return super().get(request, *args, **kwargs)
        key = (request.accepted_renderer.format, translation.get_language())
        with _generating:
            if key not in _generated:
                response = super().get(request, *args, **kwargs)
                _generated[key] = (response.data, response["Content-Disposition"])
        schema, disposition = _generated[key]
        return Response(data=schema, headers={"Content-Disposition": disposition})
