"""Query filters of the memory list (without ``q``)."""

from __future__ import annotations

import django_filters

from core.api.filtering import FilterSet
from memory.models import Memory, MemoryType


class MemoryFilter(FilterSet):
    type = django_filters.MultipleChoiceFilter(
        field_name="memory_type", choices=MemoryType.choices, label="Memory types"
    )
    min_importance = django_filters.NumberFilter(field_name="importance", lookup_expr="gte")

    class Meta:
        model = Memory
        fields = ["memory_type", "subject_type", "subject_id"]
