"""Page-number pagination with a client-chosen page size, capped.

DRF ignores a ``page_size`` it cannot read (``abc``, ``0``) and answers a page of the default
size, so a client's mistake looks like success; here it is a 400, as the schema's ``integer``
(minimum 1) says. A page number that is no page is DRF's 404.
"""

from __future__ import annotations

import re
from typing import Any

from rest_framework import pagination
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request

_INTEGER = re.compile(r"[0-9]+")


def _integer_param(request: Request, name: str, *, minimum: int | None = None) -> int | None:
    value = request.query_params.get(name)  # given twice: refused before (core.api.filtering)
    if value is None:
        return None
    if not _INTEGER.fullmatch(value) or (minimum is not None and int(value) < minimum):
        at_least = f" of at least {minimum}" if minimum is not None else ""
        raise ValidationError({name: [f"Must be an integer{at_least}."]})
    return int(value)


def check_page_params(request: Request) -> None:
    """``page`` and ``page_size`` as the schema says (400 otherwise), where a view answers
    without cutting a page (a CSV file of every row): ignored, a mistake would look fine."""
    _integer_param(request, "page", minimum=1)
    _integer_param(request, "page_size", minimum=1)


class PageNumberPagination(pagination.PageNumberPagination):
    page_size_query_param = "page_size"
    max_page_size = 100

    def get_page_size(self, request: Request) -> int | None:
        size = _integer_param(request, self.page_size_query_param, minimum=1)
        return self.page_size if size is None else min(size, self.max_page_size)

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters: list[dict[str, Any]] = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_query_param:
                parameter["schema"]["minimum"] = 1  # 0 or less: no page (404; a CSV file: 400)
            if parameter["name"] == self.page_size_query_param:
                parameter["schema"]["minimum"] = 1
                parameter["description"] = (
                    f"Results per page (default {self.page_size}; more than "
                    f"{self.max_page_size} gives {self.max_page_size})."
                )
        return parameters
