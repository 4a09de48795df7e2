"""Status chips above the admin's agents and executions lists (issue 27 item 15): a saved filter
each (runs in progress, waiting for a person, failed, ...), with how many rows it holds, one
tap away on a phone where the filter sidebar is folded. A chip sets only its own filter (a fresh
list), so its count is what it shows.

The lists' templates (templates/admin/agents/<model>/change_list.html) call ``{% list_chips cl %}``;
the chips of a model are declared here, the admin classes are untouched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django import template
from django.contrib.admin.views.main import ChangeList
from django.db.models import Count

from agents.models import ExecutionStatus as S

register = template.Library()

# model label -> (field, [(label, values)]): one chip per group of values.
CHIPS: dict[str, tuple[str, list[tuple[str, list[Any]]]]] = {
    "agents.execution": (
        "status",
        [
            ("In progress", [S.PENDING, S.RUNNING]),
            ("Waiting", [S.WAITING_APPROVAL, S.WAITING_INPUT, S.WAITING_AGENT]),
            ("Failed", [S.FAILED, S.TIMED_OUT]),
            ("Completed", [S.COMPLETED]),
            ("Cancelled", [S.CANCELLED]),
        ],
    ),
    "agents.agent": ("is_active", [("Active", [True]), ("Paused", [False])]),
}


@dataclass(frozen=True)
class Chip:
    label: str
    query: str  # the list's URL query that selects it
    count: int
    current: bool


def _param(field: str, values: list[Any]) -> tuple[str, str]:
    """The admin's own lookup, so that the sidebar's filter shows the same choice."""
    if len(values) == 1:
        value = values[0]
        return f"{field}__exact", ("1" if value else "0") if isinstance(value, bool) else value
    return f"{field}__in", ",".join(str(v) for v in values)


@register.inclusion_tag("agents/admin/list_chips.html")
def list_chips(cl: ChangeList) -> dict[str, Any]:
    spec = CHIPS.get(cl.opts.label_lower)
    if spec is None:
        return {"chips": []}
    field, groups = spec
    # Over every row the user may see in this list (the admin's own scoping), one query.
    rows = cl.model._default_manager.filter(pk__in=cl.root_queryset.values("pk"))
    counts = dict(rows.order_by().values_list(field).annotate(n=Count("pk")))
    mine = {k: v for k, v in cl.params.items() if k.split("__")[0] == field}
    chips = [Chip("All", "?", sum(counts.values()), not mine)]
    for label, values in groups:
        key, value = _param(field, values)
        chips.append(
            Chip(
                label,
                f"?{key}={value}",
                sum(counts.get(v, 0) for v in values),
                mine == {key: value},
            )
        )
    return {"chips": chips}
