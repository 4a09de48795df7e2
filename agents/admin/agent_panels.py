"""The read-only panels of the agent editor's tabs: the tools its patterns allow (also served live
by the tool preview view), the registry's tools for the pattern picker, its runs by status and
today's budget. Other
apps' panels (the agent's memory, flow, learning) are registered in agents/admin/panels.py."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Sequence
from typing import Any

from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from agents.admin.common import admin_url, changelist_link
from agents.admin.display import ToolAccess, tool_access_preview
from agents.admin.panels import tool_notes
from agents.models import Agent, Execution, ExecutionPurpose
from agents.selectors import agent_run_counts
from tools.models import Tool
from tools.selectors import active_tools
from usage.models import Budget
from usage.selectors import agent_spend_today
from usage.templatetags.usage_format import usd

PREVIEW_TEMPLATE = "admin/agents/agent/_tool_preview.html"


def render_tool_preview(
    agency_id: uuid.UUID,
    *,
    allowed: Sequence[str],
    denied: Sequence[str],
    constraints: Sequence[Any] = (),
    basis: str,
    errors: Sequence[str] = (),
) -> SafeString:
    """The tools an agent with these patterns is offered (with the registered tool notes on each:
    approvals' says which of them wait for an approval under the agency's risk rules, the tool's
    danger flag and these constraints), then those left out with the reason. ``basis`` says
    which patterns these are (saved, or as typed)."""
    offered, left_out = [], []
    for row in tool_access_preview(agency_id, allowed, denied):
        entry = {
            "name": row.tool.name,
            "url": admin_url(row.tool),
            "reason": _why(row),
        }
        if row.offered:
            entry["approval"] = tool_notes(agency_id, row.tool, constraints)
            offered.append(entry)
        else:
            left_out.append(entry)
    context = {
        "offered": offered,
        "left_out": left_out,
        "rows": [*offered, *left_out],
        "basis": basis,
        "errors": errors,
        "why_none": "the allowed list is empty" if not allowed else "no active tool matches",
    }
    return SafeString(render_to_string(PREVIEW_TEMPLATE, context))


def tool_picker_options(agency_id: uuid.UUID | None) -> list[tuple[str, list[tuple[str, str]]]]:
    """The pattern picker's choices: every tool (``*``), each name prefix shared by several
    tools (``crm_*``), and each active tool of the registry the agency sees."""
    # A superuser adding an agent has picked no agency yet: the platform's tools.
    queryset = (
        active_tools(agency_id)
        if agency_id is not None
        else Tool.objects.filter(agency__isnull=True, is_active=True)
    )
    tools = list(queryset.order_by("name").values_list("name", "display_name"))
    prefixes = Counter(name.split("_", 1)[0] for name, _ in tools if "_" in name)
    groups = [("*", f"* (every tool: {len(tools)})")]
    groups += [(f"{p}_*", f"{p}_* ({n} tools)") for p, n in sorted(prefixes.items()) if n > 1]
    names = [(name, f"{name} ({label})" if label else name) for name, label in tools]
    return [("Groups of tools", groups), ("Tools", names)]


def runs_panel(agent: Agent) -> SafeString:
    """The agent's runs (every execution of it, the list's rows), by status, each a link to them,
    and what they used."""
    counts = agent_run_counts(agent=agent)
    runs = f"{counts.total} run{'' if counts.total == 1 else 's'}"
    # Its runs, not its experiments' (evaluation runs): the list filtered as the counts are.
    its_runs = {"agent__id__exact": agent.pk, "purpose__exact": ExecutionPurpose.RUN.value}
    total = changelist_link(Execution, runs, **its_runs)
    if not counts.by_status:
        return total
    parts = format_html_join(
        " · ",
        "{}",
        (
            (
                changelist_link(
                    Execution,
                    f"{number} {status.label.lower()}",
                    **its_runs,
                    status__exact=status.value,
                ),
            )
            for status, number in counts.by_status.items()
        ),
    )
    return format_html(
        '<span data-agent-runs="{}">{}: {}</span>'
        "<br><span data-agent-run-totals>{} tokens, {}, {} tool call{}</span>",
        counts.total,
        total,
        parts,
        counts.tokens,
        usd(counts.cost_usd),
        counts.tool_calls,
        "" if counts.tool_calls == 1 else "s",
    )


def budget_panel(agent: Agent) -> SafeString:
    """Today's spending: the agency's daily budget (shared by its agents) and this agent's part:
    its runs' own cost so far (those still going too), as each run's page, the list of runs and
    daily usage say it, and apart from it what memory and quality judging called after them (the
    budget counts both, at each model call)."""
    today = timezone.localdate()
    budget = Budget.objects.filter(agency_id=agent.agency_id, date=today).first()
    latest = budget or Budget.objects.filter(agency_id=agent.agency_id).order_by("-date").first()
    mine = agent_spend_today(agent=agent)
    if budget is not None:
        agency_line = format_html(
            "{} of {} used, {} reserved by runs in progress: {} left.",
            usd(budget.used_usd),
            usd(budget.limit_usd),
            usd(budget.reserved_usd),
            usd(budget.remaining_usd),
        )
    elif latest is not None:
        agency_line = format_html(
            "Nothing spent yet; today's limit will be {} (the latest one set).",
            usd(latest.limit_usd),
        )
    else:
        agency_line = format_html("{}", "No daily budget: runs are not limited by cost.")
    going = (
        format_html(", {} still going: {} so far", mine.going_runs, usd(mine.going_usd))
        if mine.going_runs
        else ""
    )
    apart = [
        format_html("{} after them (memory extraction, quality judging)", usd(mine.after_runs_usd))
        if mine.after_runs_usd
        else "",
        format_html("{} for its experiments' runs", usd(mine.evaluations_usd))
        if mine.evaluations_usd
        else "",
    ]
    after = (
        format_html(
            "; {}: {} in all",
            format_html_join("; ", "{}", ((part,) for part in apart if part)),
            usd(mine.spent_usd),
        )
        if any(apart)
        else ""
    )
    return format_html(
        '<div class="agent-panel"><dl><dt>Agency today</dt><dd>{}</dd>'
        "<dt>This agent today</dt><dd data-agent-spend-today>"
        "<span data-agent-runs-cost-today>{}</span> for its runs ({} ended{}){}</dd></dl>"
        "<p>Before each model call a run reserves the call's highest cost against the agency's "
        "daily budget and stops with <em>budget exceeded</em> when it does not fit. {}.</p></div>",
        agency_line,
        usd(mine.runs_usd),
        mine.ended_runs,
        going,
        after,
        changelist_link(Budget, "Set the daily budget"),
    )


def _why(row: ToolAccess) -> str:
    if not row.offered:
        return row.reason
    return f"via {row.pattern}" if row.pattern != row.tool.name else "by name"
