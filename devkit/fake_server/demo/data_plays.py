"""The plays of agents with data tools: the analyst (figures, a notification, a report), the
orchestrator (a customer without an open task is handed to another agent with
``delegate_to_agent``, or gets a task when there is none to hand it to) and the guardian (an
alert only when something looks wrong)."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from devkit.fake_server.demo.conversation import Call
from devkit.fake_server.demo.situation import (
    Action,
    Play,
    Situation,
    StepFn,
    rows,
    who,
)


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _groups(output: Mapping[str, Any] | None) -> str:
    groups = (output or {}).get("groups") or []
    parts = [f"{g.get('key') or 'none'} {g.get('value')}" for g in groups if isinstance(g, dict)]
    return ", ".join(parts) or "none yet"


def _count(output: Mapping[str, Any] | None, key: str) -> int:
    groups = (output or {}).get("groups") or []
    return sum(
        int(g.get("value") or 0) for g in groups if isinstance(g, dict) and g.get("key") == key
    )


def _aggregated(s: Situation, entity: str) -> dict[str, Any] | None:
    for call in s.calls:
        if call.name == "data_aggregate" and call.arguments.get("entity_type") == entity:
            return None if call.failed else dict(call.output)
    return None


def _analyst_report(s: Situation) -> str:
    contacts, tasks = _aggregated(s, "contacts"), _aggregated(s, "tasks")
    leads, customers = _count(contacts, "lead"), _count(contacts, "customer")
    open_tasks = _count(tasks, "open") + _count(tasks, "in_progress")
    notes = (s.output("data_query") or {}).get("rows") or []
    recommendations = []
    if leads > customers:
        recommendations.append(
            f"{leads} leads against {customers} customers: give the SDR agent the newest leads "
            "first."
        )
    if open_tasks > 3:
        recommendations.append(f"{open_tasks} open tasks: clear the overdue ones this week.")
    if not recommendations:
        recommendations.append("The pipeline is balanced; keep the current follow-up rhythm.")
    newest = str(notes[0].get("content") or "") if notes and isinstance(notes[0], dict) else ""
    latest = f"the latest: “{newest[:120]}”" if newest else "none with text"
    return "\n".join(
        [
            "Pipeline report",
            f"- Contacts by status: {_groups(contacts)}.",
            f"- Tasks by status: {_groups(tasks)}.",
            f"- Recent notes: {len(notes)}; {latest}.",
            "Recommendations:",
            *(f"- {r}" for r in recommendations),
        ]
    )


def _aggregate(entity: str, thought: str) -> StepFn:
    def step(s: Situation) -> Action | None:
        return Action(
            "data_aggregate",
            {"entity_type": entity, "metric": "count", "group_by": "status"},
            thought,
        )

    return step


def _analyst_notes(s: Situation) -> Action | None:
    return Action(
        "data_query",
        {"entity_type": "notes", "limit": 10, "order_by": "-created_at"},
        "And the latest activity: the ten most recent notes.",
    )


def _analyst_notify(s: Situation) -> Action | None:
    contacts, tasks = _aggregated(s, "contacts"), _aggregated(s, "tasks")
    message = f"Pipeline report: contacts {_groups(contacts)}; tasks {_groups(tasks)}."
    return Action(
        "notify_user",
        {"message": message[:1900], "level": "info"},
        "The figures are in. I'll notify the team with the headline numbers.",
    )


def _analyst_summary(s: Situation) -> str:
    return _analyst_report(s) + "".join(f"\n- Could not complete {e}" for e in s.errors())


def _orchestrator_customers(s: Situation) -> Action | None:
    return Action(
        "data_query",
        {
            "entity_type": "contacts",
            "filters": {"status": "customer"},
            "limit": 10,
            "order_by": "-created_at",
        },
        "First, which customers do we have? I'll check each one's situation.",
    )


def _orchestrator_tasks(s: Situation) -> Action | None:
    return Action(
        "data_query",
        {"entity_type": "tasks", "filters": {"status": {"in": ["open", "in_progress"]}}},
        "Now the open tasks, to see who is already being looked after.",
    )


def _uncovered_customer(s: Situation) -> dict[str, Any] | None:
    """The first customer no open task is about (by its contact, or by name in its title)."""
    queries = [c for c in s.calls if c.name == "data_query"]
    customers = rows(queries[0] if queries else None)
    tasks = rows(queries[1] if len(queries) > 1 else None)
    covered_ids = {str(t.get("contact_id")) for t in tasks if t.get("contact_id")}
    titles = " ".join(str(t.get("title") or "") for t in tasks)
    for customer in customers:
        name = f"{customer.get('first_name') or ''} {customer.get('last_name') or ''}".strip()
        if str(customer.get("id")) not in covered_ids and name and name not in titles:
            return {**customer, "name": name}
    return None


DELEGATE = "delegate_to_agent"


def _renewals_agent(s: Situation) -> str | None:
    """The agent to hand a renewal to: one the delegate tool lists that speaks of renewals,
    else the first it lists; None when it is not offered or lists nobody."""
    if DELEGATE not in s.tools or not s.team:
        return None
    for slug, about in s.team:
        if "renewal" in f"{slug} {about}".lower():
            return slug
    return s.team[0][0]


def _delegation(s: Situation) -> Call | None:
    return next((call for call in s.calls if call.name == DELEGATE), None)


def _orchestrator_delegate(s: Situation) -> Action | None:
    customer, agent = _uncovered_customer(s), _renewals_agent(s)
    if customer is None or agent is None:
        return None
    name = who(customer)
    record = f" <{customer['email']}>" if customer.get("email") else ""
    return Action(
        DELEGATE,
        {
            "agent": agent,
            "instruction": f"Renewal check-in with {name}{record}: no open task covers this "
            "customer. Log the check-in on their record and create a follow-up task.",
        },
        f"{name} has no open task. Handing the renewal check-in to the {agent} agent and "
        "waiting for its answer.",
    )


def _orchestrator_handover(s: Situation) -> Action | None:
    """A task for the team: when there is no agent to delegate to, or the delegation failed."""
    customer = _uncovered_customer(s)
    delegation = _delegation(s)
    if customer is None or (
        _renewals_agent(s) is not None and not (delegation and delegation.failed)
    ):
        return None
    name = who(customer)
    return Action(
        "task_create",
        {
            "title": f"Renewal check-in with {name}"[:300],
            "description": "Created by the CS orchestrator: no open task covers this customer.",
            "priority": "medium",
            "due_date": s.due(3),
        },
        f"{name} has no open task. Creating a renewal check-in task for the team."
        if delegation is None
        else f"The hand-over did not work out, so I'll create a renewal check-in task for {name}.",
    )


def _handled(s: Situation) -> str | None:
    """What was done for the uncovered customer, in a few words (None: nothing)."""
    delegation, customer = _delegation(s), _uncovered_customer(s)
    if delegation is not None and not delegation.failed:
        whom = f" with {who(customer)}" if customer else ""
        return f"the {delegation.arguments.get('agent')} agent handled the renewal check-in{whom}"
    task = (s.output("task_create") or {}).get("task")
    if isinstance(task, dict):
        return f"created the task “{task.get('title')}”"
    return None


def _orchestrator_notify(s: Situation) -> Action | None:
    handled = _handled(s)
    message = (
        f"Customer success: {handled}."
        if handled
        else "Customer success: every customer is covered by an open task."
    )
    return Action(
        "notify_user",
        {"message": message[:1900], "level": "info"},
        "Letting the team know what was done.",
    )


def _orchestrator_summary(s: Situation) -> str:
    queries = [c for c in s.calls if c.name == "data_query"]
    customers = rows(queries[0] if queries else None)
    tasks = rows(queries[1] if len(queries) > 1 else None)
    delegation = _delegation(s)
    task = (s.output("task_create") or {}).get("task")
    lines = [
        f"Reviewed {_plural(len(customers), 'customer')} and {_plural(len(tasks), 'open task')}."
    ]
    if delegation is not None and not delegation.failed:
        answer = str(delegation.output.get("output") or "").strip() or "(no answer)"
        lines.append(
            f"- Delegated the renewal check-in to the {delegation.arguments.get('agent')} agent "
            "(delegate_to_agent), which answered:"
        )
        lines += [f"  {line}" for line in answer.splitlines() if line.strip()]
    if isinstance(task, dict):
        lines.append(f"- Created the task “{task.get('title')}” for the team.")
    if delegation is None and not isinstance(task, dict):
        lines.append("- Nothing to hand over: every customer is covered.")
    lines += [f"- Could not complete {error}" for error in s.errors()]
    return "\n".join(lines)


def _guardian_emails(s: Situation) -> Action | None:
    return Action(
        "data_query",
        {"entity_type": "emails", "filters": {"status": "failed"}, "limit": 20},
        "Routine check. First: e-mails that failed to send (a sign of a bad sender setup or "
        "abuse).",
    )


def _guardian_contacts(s: Situation) -> Action | None:
    since = (s.now - datetime.timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return Action(
        "data_query",
        {"entity_type": "contacts", "filters": {"created_at": {"gte": since}}, "limit": 100},
        "Next: contacts created in the last 24 hours, to spot a burst of sign-ups.",
    )


def _guardian_findings(s: Situation) -> list[str]:
    queries = [c for c in s.calls if c.name == "data_query"]
    failed = rows(queries[0] if queries else None)
    new = rows(queries[1] if len(queries) > 1 else None)
    findings = []
    if failed:
        findings.append(f"{_plural(len(failed), 'e-mail')} failed to send")
    if len(new) >= 50:
        findings.append(f"{len(new)} contacts were created in 24 hours")
    return findings


def _guardian_alert(s: Situation) -> Action | None:
    findings = _guardian_findings(s)
    if not findings:
        return None
    return Action(
        "notify_user",
        {"message": "Security check: " + "; ".join(findings) + ".", "level": "warning"},
        "That needs a human's eyes. Raising an alert with the evidence.",
    )


def _guardian_summary(s: Situation) -> str:
    findings = _guardian_findings(s)
    if findings:
        return "Alert raised: " + "; ".join(findings) + "."
    queries = [c for c in s.calls if c.name == "data_query"]
    new = rows(queries[1] if len(queries) > 1 else None)
    return (
        f"All clear: no failed e-mails, {_plural(len(new), 'new contact')} in the last 24 "
        "hours, which is normal. No alert raised."
    )


ANALYST = Play(
    "analyst",
    (
        _aggregate("contacts", "Let me pull the figures. First, the pipeline: contacts by status."),
        _aggregate("tasks", "Next, the team's workload: tasks by status."),
        _analyst_notes,
        _analyst_notify,
    ),
    _analyst_summary,
)
ORCHESTRATOR = Play(
    "orchestrator",
    (
        _orchestrator_customers,
        _orchestrator_tasks,
        _orchestrator_delegate,
        _orchestrator_handover,
        _orchestrator_notify,
    ),
    _orchestrator_summary,
)
GUARDIAN = Play(
    "guardian", (_guardian_emails, _guardian_contacts, _guardian_alert), _guardian_summary
)
