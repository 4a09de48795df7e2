"""The plays of agents with CRM tools: the SDR (score a lead, propose an e-mail that waits for an
approval) and the assistant (log the request on the contact, create a follow-up task)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

from devkit.fake_server.demo.situation import (
    Action,
    Play,
    Situation,
    find_contact,
    first_name,
    is_trigger,
    open_contact,
    recent_note,
    request_in_words,
    who,
)

_SENIOR = re.compile(
    r"\b(head|vp|vice|director|chief|ceo|cto|cfo|coo|founder|owner|partner)\b", re.I
)


def _lead_score(contact: Mapping[str, Any]) -> int:
    """A deterministic ICP-fit score: seniority, a company, buying signals in the tags."""
    score = 52
    if _SENIOR.search(str(contact.get("job_title") or "")):
        score += 14
    if contact.get("company"):
        score += 8
    tags = {str(t).lower() for t in contact.get("tags") or []}
    score += 6 * len(tags & {"inbound", "demo-request", "pricing", "referral", "enterprise"})
    digest = hashlib.sha256(str(contact.get("email") or contact.get("id")).encode()).digest()
    return min(97, score + digest[0] % 9)


def _sdr_note(s: Situation) -> Action | None:
    contact = s.contact
    if contact is None or s.called("crm_add_note"):
        return None
    score = _lead_score(contact)
    band = "high fit: personal outreach" if score > 70 else "medium fit: nurture sequence"
    title = contact.get("job_title") or "role unknown"
    return Action(
        "crm_add_note",
        {
            "contact_id": str(contact["id"]),
            "content": f"Lead score {score}/100 ({band}). {title} at "
            f"{contact.get('company') or 'an unknown company'}; status {contact.get('status')}.",
            "type": "note",
        },
        f"{s.recalled(contact)}{who(contact)} is {title}. Scoring the lead against our ICP: "
        f"{score}/100. "
        "I'll record the score on the contact before reaching out.",
    )


def _sdr_email(s: Situation) -> Action | None:
    contact = s.contact
    if contact is None or not contact.get("email"):
        return None
    first = first_name(contact)
    company = contact.get("company") or "your team"
    spoke_before = any(
        not str(note.get("content") or "").startswith("Lead score")
        for note in contact.get("recent_notes") or []
        if isinstance(note, dict)
    )
    hook = (
        "Thanks again for your time when we last spoke. "
        if spoke_before
        else f"I've been looking at how {company} handles new enquiries, and "
    )
    body = (
        f"Hi {first},\n\n{hook}I think a 20-minute call could be worth your while: we help "
        "teams like yours answer new leads within minutes and keep their pipeline tidy "
        "without extra headcount.\n\nWould Tuesday or Thursday afternoon work for a quick "
        "call?\n\nBest regards"
    )
    return Action(
        "email_send",
        {"to": [str(contact["email"])], "subject": f"A quick idea for {company}", "body": body},
        f"Drafting a short, personal outreach e-mail to {first}. Sending e-mail needs a "
        "person's approval, so this will wait for an approver before it goes out.",
    )


def _sdr_summary(s: Situation) -> str:
    contact = s.contact
    if contact is None:
        return (
            f"I couldn't find a matching contact for {request_in_words(s.text)} in the CRM, so I "
            "didn't reach out to anyone. Add the person as a contact (or give me their e-mail "
            "address) and run me again."
        )
    lines = [f"Worked on {who(contact)}:"]
    if s.output("crm_add_note"):
        lines.append(f"- scored the lead {_lead_score(contact)}/100 and noted it on the record;")
    sent = s.output("email_send")
    if sent:
        lines.append(
            f"- the outreach e-mail was approved and handed to the mail server "
            f"(status: {sent.get('status', 'queued')});"
        )
        lines.append("- next step: follow up in three working days if there is no reply.")
    elif s.called("email_send"):
        lines.append("- the outreach e-mail was not sent.")
    for error in s.errors():
        lines.append(f"- could not complete {error}")
    return "\n".join(lines)


def _assistant_note(s: Situation) -> Action | None:
    contact = s.contact
    if contact is None:
        return None
    last = recent_note(contact)
    context = f" Last note on file: {last[:140]}" if last else ""
    return Action(
        "crm_add_note",
        {
            "contact_id": str(contact["id"]),
            "content": f"Request: {request_in_words(s.text)}.{context}",
            "type": "note",
        },
        f"{s.recalled(contact)}This is {who(contact)}, status {contact.get('status')}. I'll log "
        "the request on the record so the whole team sees it.",
    )


ASK_OPTIONS = ["Yes, create a task for the team", "No, leave it"]


def _assistant_ask(s: Situation) -> Action | None:
    """Nobody the request names is in the CRM: ask a person before making work for the team
    (offered ask_user only; without it the task is created straight away)."""
    if s.contact is not None:
        return None
    return Action(
        "ask_user",
        {
            "question": f"The request {request_in_words(s.text)} names no contact I can find in "
            "the CRM. Should I hand it to the team as a follow-up task?",
            "options": ASK_OPTIONS,
            "question_type": "confirmation",
        },
        "I can't tell who this is about, so I'll ask before creating work for the team.",
    )


def _declined(s: Situation) -> bool:
    answer = str((s.output("ask_user") or {}).get("answer") or "")
    return answer.strip().lower().startswith("no")


def _assistant_task(s: Situation) -> Action | None:
    if _declined(s):
        return None
    contact = s.contact
    plain = request_in_words(s.text) if is_trigger(s.text) else " ".join(s.text.split())
    title = f"Follow up with {who(contact)}" if contact else f"Look into: {plain}"
    priority = "high" if contact and contact.get("status") == "lead" else "medium"
    return Action(
        "task_create",
        {
            "title": title[:300],
            "description": f"Created by the assistant for {request_in_words(s.text)}.",
            "priority": priority,
            "due_date": s.due(2),
        },
        "Now a follow-up task, due in two working days, so that this does not get lost."
        if contact
        else "No contact is named, so I'll hand this to the team as a task.",
    )


def _assistant_summary(s: Situation) -> str:
    contact = s.contact
    if contact:
        lines = [f"Done: {who(contact)}."]
    elif _declined(s):
        lines = ["Left it, as you answered: no task was created."]
    elif s.called("crm_search_contacts") or s.called("crm_get_contact"):
        lines = ["I couldn't find a matching contact in the CRM."]
    else:
        lines = ["The request names no contact, so I handed it to the team as a task."]
    if s.output("crm_add_note"):
        lines.append("- Logged the request as a note on the contact.")
    task = (s.output("task_create") or {}).get("task")
    if isinstance(task, dict):
        lines.append(
            f"- Created the task “{task.get('title')}” ({task.get('priority')} priority, due "
            f"{str(task.get('due_at') or '')[:10]})."
        )
    lines += [f"- Could not complete {error}" for error in s.errors()]
    return "\n".join(lines)


SDR = Play(
    "sdr",
    (find_contact("lead", pick_when_unnamed=True), open_contact, _sdr_note, _sdr_email),
    _sdr_summary,
)
ASSISTANT = Play(
    "assistant",
    (
        find_contact("lead", pick_when_unnamed=False),
        open_contact,
        _assistant_note,
        _assistant_ask,
        _assistant_task,
    ),
    _assistant_summary,
)
