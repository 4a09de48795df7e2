"""What a play knows and does: the situation (instruction, tools, calls so far), the action it
takes next, and the steps the CRM plays share (find the contact, open the record)."""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from devkit.fake_server.demo.conversation import CONTACT_ID, EMAIL, UUID, Call, name_query
from devkit.fake_server.demo.learning import remembered


@dataclass(frozen=True, slots=True)
class Action:
    tool: str
    arguments: dict[str, Any]
    thought: str


@dataclass
class Situation:
    """What a play knows when it picks its next step: the request and the calls replayed so far."""

    text: str
    tools: frozenset[str]
    now: datetime.datetime
    calls: list[Call] = field(default_factory=list)
    team: tuple[tuple[str, str], ...] = ()  # agents it may delegate to: (slug, about)
    system: str = ""  # the system prompt: what the run recalled from memory is in it
    said: str = ""  # the last thing said after the instruction (a person's answer), or it

    def recalled(self, contact: Mapping[str, Any]) -> str:
        """What the run recalled about ``contact`` from earlier runs, as a sentence ("")."""
        name = str(contact.get("name") or "")
        lines = remembered(self.system, name)
        return f"From memory: {' '.join(lines[:3])} " if lines else ""

    def output(self, tool: str) -> dict[str, Any] | None:
        """The latest successful result of ``tool``."""
        for call in reversed(self.calls):
            if call.name == tool and not call.failed:
                return dict(call.output)
        return None

    def called(self, tool: str) -> bool:
        return any(call.name == tool for call in self.calls)

    def errors(self) -> list[str]:
        return [f"{call.name}: {error_message(call.output)}" for call in self.calls if call.failed]

    @property
    def contact(self) -> dict[str, Any] | None:
        """The contact the run is about: the record opened, else the best search match."""
        opened = self.output("crm_get_contact")
        if opened and isinstance(opened.get("contact"), dict):
            return dict(opened["contact"])
        found = self.output("crm_search_contacts")
        contacts = (found or {}).get("contacts") or []
        return dict(contacts[0]) if contacts and isinstance(contacts[0], dict) else None

    def due(self, days: int) -> str:
        day = self.now + datetime.timedelta(days=days)
        while day.weekday() >= 5:  # a weekday
            day += datetime.timedelta(days=1)
        return day.replace(hour=9, minute=0, second=0, microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


StepFn = Callable[[Situation], Action | None]


@dataclass(frozen=True)
class Play:
    name: str
    steps: tuple[StepFn, ...]
    summary: Callable[[Situation], str]


def error_message(output: Any) -> str:
    if isinstance(output, dict) and isinstance(output.get("error"), dict):
        return str(output["error"].get("message") or output["error"].get("code") or "failed")
    return "no result"


def who(contact: Mapping[str, Any]) -> str:
    name = str(contact.get("name") or contact.get("email") or "the contact")
    company = contact.get("company")
    return f"{name} ({company})" if company else name


def first_name(contact: Mapping[str, Any]) -> str:
    first = contact.get("first_name") or str(contact.get("name") or "").split(" ")[0]
    return str(first or "there")


def _quoted(text: str) -> str:
    one_line = " ".join(text.split())
    return f"“{one_line[:160]}{'…' if len(one_line) > 160 else ''}”"


def request_in_words(text: str) -> str:
    if not is_trigger(text):
        return _quoted(text)
    data = trigger_data(text)
    webhook = data.get("webhook")
    if isinstance(webhook, dict):  # webhooks.receive: {"webhook": {"id", "name"}, "payload"}
        said = _message(data.get("payload"))
        delivery = f"a delivery of the “{webhook.get('name') or 'inbound'}” webhook"
        return f"{delivery}: {_quoted(said)}" if said else delivery
    return "a routine check (no instruction given)"


def _message(payload: Any) -> str:
    """What a person wrote, in a payload that carries it (a form's message, a subject)."""
    if not isinstance(payload, dict):
        return ""
    for key in ("message", "text", "subject", "summary", "body"):
        if isinstance(payload.get(key), str) and payload[key].strip():
            return str(payload[key])
    return ""


# --- shared steps ---------------------------------------------------------------------------------


TRIGGER_PREFIX = "You were triggered with:"


def is_trigger(text: str) -> bool:
    """Whether ``text`` describes a trigger (a run started with no instruction)."""
    return not text.strip() or text.startswith(TRIGGER_PREFIX)


def trigger_data(text: str) -> dict[str, Any]:
    """The ``data`` of a trigger's description (agents.models.Execution.first_user_message):
    an event's or a webhook delivery's ``payload`` beside ids of its own ({} when none)."""
    try:
        described = json.loads(text.removeprefix(TRIGGER_PREFIX))
    except ValueError:
        return {}
    data = described.get("data") if isinstance(described, dict) else None
    return dict(data) if isinstance(data, dict) else {}


def about(text: str) -> str:
    """Where to look for the contact a request is about: the instruction, or a trigger's payload
    (not the ids a trigger carries of its own: a webhook's, an event's)."""
    if not is_trigger(text):
        return text
    payload = trigger_data(text).get("payload")
    return json.dumps(payload, ensure_ascii=False) if payload else ""


def find_contact(default_status: str, *, pick_when_unnamed: bool) -> StepFn:
    """Open the contact the request names (e-mail, id or name); when it names nobody, pick one
    of the ``default_status`` contacts if the run had no instruction or ``pick_when_unnamed``."""

    def step(s: Situation) -> Action | None:
        text = about(s.text)
        if email := EMAIL.search(text):
            return Action(
                "crm_get_contact",
                {"email": email.group()},
                f"The request names {email.group()}. Let me open that contact's record first.",
            )
        # A bare id is a contact's only in an instruction: a payload names its contact_id.
        bare = None if is_trigger(s.text) else UUID.search(text)
        if contact_id := CONTACT_ID.search(text) or bare:
            return Action(
                "crm_get_contact",
                {"contact_id": contact_id.group("id")},
                "I was given a contact id. Let me open that record first.",
            )
        query = name_query(text)
        if query:
            return Action(
                "crm_search_contacts",
                {"query": query, "limit": 5},
                f"The request is about {query}. I'll look them up in the CRM before doing "
                "anything else.",
            )
        if not (pick_when_unnamed or is_trigger(s.text)):
            return None
        return Action(
            "crm_search_contacts",
            {"query": "", "status": default_status, "limit": 5},
            f"No one is named, so I'll start from the CRM's current {default_status}s and pick "
            "the one to work on.",
        )

    return step


def open_contact(s: Situation) -> Action | None:
    found = s.output("crm_search_contacts")
    if s.called("crm_get_contact") or not found or not found.get("contacts"):
        return None
    contacts = found["contacts"]
    best = contacts[0]
    others = f" ({len(contacts) - 1} more matched)" if len(contacts) > 1 else ""
    return Action(
        "crm_get_contact",
        {"contact_id": str(best.get("id"))},
        f"Found {who(best)}{others}. Opening the full record to see the job title and the "
        "latest notes.",
    )


def recent_note(contact: Mapping[str, Any]) -> str:
    notes = contact.get("recent_notes") or []
    if notes and isinstance(notes[0], dict):
        return str(notes[0].get("content") or "")
    return ""


def rows(call: Call | None) -> list[dict[str, Any]]:
    if call is None or call.failed:
        return []
    return [r for r in call.output.get("rows") or [] if isinstance(r, dict)]
