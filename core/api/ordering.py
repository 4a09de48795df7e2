"""List ordering that pages correctly."""

from __future__ import annotations

from typing import Any

from django.db.models import Model, QuerySet
from rest_framework.filters import OrderingFilter
from rest_framework.request import Request


class StableOrderingFilter(OrderingFilter):
    """DRF's ``?ordering=``, with the primary key as the last sort key.

    Ordered only by a column with repeated values (``cost_usd``, ``completed_at``...), PostgreSQL
    may order the ties differently for each LIMIT/OFFSET, so paging repeats one row and skips
    another. The primary key makes the order total: every row appears on exactly one page.
    """

    def filter_queryset[M: Model, R](
        self, request: Request, queryset: QuerySet[M, R], view: Any
    ) -> QuerySet[M, R]:
        queryset = super().filter_queryset(request, queryset, view)
        ordering = list(queryset.query.order_by) or list(queryset.model._meta.ordering or ())
        if not ordering:
            return queryset  # unordered on purpose: nothing to make stable
        names = {item.lstrip("-") for item in ordering if isinstance(item, str)}
        if names & {"pk", "id"}:
            return queryset
        return queryset.order_by(*ordering, "pk")
