"""The demo model's answers to the platform's reviews of a finished run (memory.after_run): what
to remember (memory.extraction asks for JSON memories) and how well it went (the quality judge,
memory.learning.quality), read from the run's digest. So the demo agents learn like agents on a
real model do: each contact a run opened leaves a fact, a lead score or an e-mail sent leaves an
outcome, an enquiry what was asked; the next run about that contact recalls them (its system
prompt's memory section, which the plays quote: :func:`remembered`)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from devkit.fake_server.script import RecordedRequest

# The opening of each review's system prompt (memory.extraction, memory.learning.quality).
_EXTRACTION = "You review a finished run of an AI agent and decide what it should remember"
_JUDGE = "You review a finished run of an AI agent and judge how well it did"
# The evaluations' judge of a test case's rubric (evals.judge.SYSTEM).
_CASE_JUDGE = "You judge a test case's run of an AI agent against a rubric"
# The memory section of a run's system prompt (agents.runtime.context.build_system_prompt).
_MEMORY_SECTION = "## Relevant Context from Memory\n"

_CALL = re.compile(r"^- (?P<tool>\w+)\((?P<arguments>.*)\) -> (?P<result>.*)$", re.M)
_FIELD = r'"{}": "(?P<value>(?:[^"\\]|\\.)*)"'
_SCORE = re.compile(r"Lead score (?P<score>\d+)/100 \((?P<band>[^)]*)\)")
_ASKED = re.compile(r"^Request: (?P<request>.+?)\.(?: Last note on file|$)")


def review(request: RecordedRequest) -> str | None:
    """The answer to a review of a finished run, or None when ``request`` is none."""
    system = request.system or ""
    if system.startswith(_CASE_JUDGE):
        return json.dumps(_case_judgement(_digest(request)))
    if not system.startswith((_EXTRACTION, _JUDGE)):
        return None
    digest = _digest(request)
    if system.startswith(_JUDGE):
        return json.dumps(_judgement(digest))
    return json.dumps(
        {
            "memories": _memories(digest),
            "lessons": ["Open the contact's record before writing to it or about it."]
            if "crm_get_contact(" in digest
            else [],
            "should_repeat": "Status: completed" in digest,
        }
    )


def remembered(system: str | None, name: str) -> list[str]:
    """The memories of the run's system prompt that mention ``name`` (without their type)."""
    section = (system or "").partition(_MEMORY_SECTION)[2].split("\n## ", 1)[0]
    lines = [line.removeprefix("- ") for line in section.splitlines() if line.startswith("- ")]
    return [
        re.sub(r"^\[\w+\] ", "", line) for line in lines if name and name.lower() in line.lower()
    ]


def _digest(request: RecordedRequest) -> str:
    for message in request.messages:
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, str):
            return content
        parts = message.get("parts") or content or []
        text = "".join(str(p.get("text", "")) for p in parts if isinstance(p, dict) and "text" in p)
        if message.get("role") == "user" and text:
            return text
    return ""


def _field(name: str, text: str) -> str:
    found = re.search(_FIELD.format(name), text)
    return json.loads(f'"{found.group("value")}"') if found else ""


def _json(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:  # clipped in the digest
        return {}
    return dict(value) if isinstance(value, dict) else {}


def _memories(digest: str) -> list[dict[str, Any]]:
    calls = [m.groupdict() for m in _CALL.finditer(digest)]
    contacts: dict[str, dict[str, str]] = {}
    for call in calls:
        if call["tool"] == "crm_get_contact" and '"contact"' in call["result"]:
            contact_id = _field("id", call["result"])
            if contact_id:
                contacts[contact_id] = {
                    key: _field(key, call["result"])
                    for key in ("name", "company", "job_title", "status", "email")
                }
    memories: list[dict[str, Any]] = []
    for contact_id, contact in contacts.items():
        memories.extend(_about(contact_id, contact, calls))
    return memories


def _about(
    contact_id: str, contact: Mapping[str, str], calls: list[dict[str, str]]
) -> list[dict[str, Any]]:
    name = contact["name"] or contact["email"]
    at = f" ({contact['company']})" if contact["company"] else ""
    subject = {"subject_type": "contact", "subject_id": contact_id}
    title = contact["job_title"] or "a contact"
    company = f" at {contact['company']}" if contact["company"] else ""
    found: list[dict[str, Any]] = [
        {
            "type": "fact",
            "content": f"{name} is {title}{company} (CRM status: {contact['status'] or '?'}).",
            "confidence": 0.9,
            "importance": 5,
            "tags": ["crm"],
            **subject,
        }
    ]
    for call in calls:
        arguments = _json(call["arguments"])
        failed = '"error"' in call["result"][:20]
        if failed:
            continue
        if call["tool"] == "crm_add_note" and arguments.get("contact_id") == contact_id:
            note = str(arguments.get("content") or "")
            if score := _SCORE.search(note):
                found.append(
                    {
                        "type": "outcome",
                        "content": f"Scored {name}{at} {score['score']}/100 as a lead "
                        f"({score['band']}).",
                        "confidence": 0.8,
                        "importance": 7,
                        "tags": ["lead-score"],
                        **subject,
                    }
                )
            elif asked := _ASKED.search(note):
                found.append(
                    {
                        "type": "fact",
                        "content": f"Request about {name}{at}: {asked['request']}.",
                        "confidence": 0.9,
                        "importance": 6,
                        "tags": ["request"],
                        "expires_in_days": 90,
                        **subject,
                    }
                )
        if call["tool"] == "email_send" and contact["email"] in (arguments.get("to") or []):
            found.append(
                {
                    "type": "outcome",
                    "content": f"Sent {name}{at} an outreach e-mail "
                    f"(“{arguments.get('subject') or ''}”); follow up if there is no reply "
                    "within three working days.",
                    "confidence": 1.0,
                    "importance": 7,
                    "tags": ["outreach"],
                    "expires_in_days": 30,
                    **subject,
                }
            )
    return found


def _judgement(digest: str) -> dict[str, Any]:
    completed = "Status: completed" in digest
    failed = sum('"error"' in m["result"][:20] for m in _CALL.finditer(digest))
    if completed and not failed:
        return {"score": 0.9, "verdict": "good", "reason": "It did what it was asked."}
    why = f"{failed} tool call(s) failed." if failed else "It did not complete."
    return {"score": 0.4, "verdict": "bad", "reason": why}


def _case_judgement(prompt: str) -> dict[str, Any]:
    """A test case's run judged against its rubric: well when it completed with an answer."""
    answered = "Final answer: (none)" not in prompt
    if "Status: completed" in prompt and answered:
        return {"score": 0.9, "reason": "It completed and answered what the rubric asks."}
    return {"score": 0.2, "reason": "It did not complete with an answer."}
