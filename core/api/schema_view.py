"""``/api/schema/``: drf-spectacular's schema view, generating one schema at a time per process.

drf-spectacular resolves its extensions' target classes (given as import paths) lazily, on a
first generation, by rewriting a class attribute that another thread may be reading: two
generations at once in a process that has made none yet (a web server just started, two people
opening the API docs) answer 500 with ``AttributeError: 'NoneType' object has no attribute
'startswith'`` (tfranzel/drf-spectacular#1122; found by the soak, bench/soak). Generations are
rare and each keeps a core busy for seconds, so waiting for another costs nothing.
"""

from __future__ import annotations

import threading
from typing import Any

from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SpectacularAPIView
from rest_framework.request import Request
from rest_framework.response import Response

_generating = threading.Lock()


class SchemaView(SpectacularAPIView):
    @extend_schema(exclude=True)  # as the view it extends: the schema does not list itself
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        with _generating:
            return super().get(request, *args, **kwargs)
