"""The API's only request parser: JSON, bounded in size and depth, and storable in PostgreSQL.

DRF's JSON parser reads the request stream directly, so Django's ``DATA_UPLOAD_MAX_MEMORY_SIZE``
never applies to it; this one enforces ``API_MAX_BODY_BYTES`` itself (413). It also refuses, with
a 400, what PostgreSQL cannot store and would otherwise turn into a 500 deep in a service: NUL
characters, unpaired surrogates, non-finite numbers (``1e999`` parses as infinity).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from core.api.exceptions import PayloadTooLarge
from core.storable import MAX_DEPTH, unstorable


def _content_length(parser_context: Mapping[str, Any] | None) -> int:
    request = (parser_context or {}).get("request")
    meta = getattr(request, "META", {}) if request is not None else {}
    try:
        return int(meta.get("CONTENT_LENGTH") or 0)
    except (TypeError, ValueError):
        return 0


class BoundedJSONParser(JSONParser):
    def parse(
        self,
        stream: Any,
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        limit = settings.API_MAX_BODY_BYTES
        too_large = f"The request body is larger than {limit} bytes."
        if _content_length(parser_context) > limit:
            raise PayloadTooLarge(too_large)
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise PayloadTooLarge(too_large)
        encoding = (parser_context or {}).get("encoding") or settings.DEFAULT_CHARSET
        try:
            data = json.loads(raw.decode(encoding), parse_constant=_reject_constant)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        except RecursionError:
            raise ParseError(
                f"JSON nested deeper than {MAX_DEPTH} levels is not accepted."
            ) from None
        problem = unstorable(data)
        if problem:
            raise ParseError(problem)
        return data


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")
