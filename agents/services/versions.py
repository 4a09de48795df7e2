"""Agent versions: recorded by the agent services when a save changes the configuration, read by
the admin and the API, compared field by field, and restored (as a new version).

A version's ``config`` is the JSON form of the agent's :data:`~agents.models.VERSIONED_FIELDS`
(:func:`config_of`); a save makes a version only when that form differs from the latest
version's, so a save of switches (``is_active``), of stats, or of nothing makes none.
"""

from __future__ import annotations

import difflib
import functools
import itertools
import json
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal, Protocol

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.core.exceptions import ImproperlyConfigured
from django.db import models
from django.http import Http404
from django.utils.module_loading import import_string

from agents.models import VERSIONED_FIELDS, Agent, AgentConfig, AgentVersion

type VersionConfig = dict[str, Any]  # field name -> JSON value

_FIELDS: dict[str, models.Field[Any, Any]] = {
    f.name: f for f in AgentConfig._meta.concrete_fields if f.name in VERSIONED_FIELDS
}
# Past this length (or with a line break) a value is compared line by line.
SHORT_TEXT = 80


def _json_value(model_field: models.Field[Any, Any], value: Any) -> Any:
    """The one JSON form of a field's value, whatever Python form it has in memory (a form's
    ``Decimal("0.7")`` and the database's ``Decimal("0.70")`` must compare equal)."""
    if isinstance(model_field, models.JSONField):
        return value
    if isinstance(model_field, ArrayField):
        return [str(item) for item in value or []]
    value = model_field.to_python(value)
    if isinstance(value, Decimal):
        places = getattr(model_field, "decimal_places", 2)
        return str(value.quantize(Decimal(1).scaleb(-places)))
    if isinstance(value, str):
        return plain_line_breaks(str(value))  # (str(): a TextChoices member as its value)
    return value


def plain_line_breaks(text: str) -> str:
    r"""Text with its line breaks as ``\n``. A browser sends a textarea's as ``\r\n`` (HTML's
    form submission does), so a prompt saved from the admin unchanged came back with other
    bytes than it was stored with, and was recorded as changed: struck out and re-added
    identically in the diff. The agent services store text so, and versions compare so (the
    versions recorded before kept the ``\r\n``)."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _comparable(value: Any) -> Any:
    return plain_line_breaks(value) if isinstance(value, str) else value


def config_of(agent: Agent) -> VersionConfig:
    """The agent's configuration as a version stores it."""
    return {name: _json_value(f, getattr(agent, name)) for name, f in _FIELDS.items()}


def config_fields(config: VersionConfig) -> dict[str, Any]:
    """A stored configuration as model field values (for a restore). Fields added after the
    version was made are left out (the agent keeps its values); fields since removed are
    ignored."""
    return {
        name: _FIELDS[name].to_python(value) for name, value in config.items() if name in _FIELDS
    }


def changed_fields(before: VersionConfig | None, after: VersionConfig) -> list[str]:
    if before is None:
        return []
    names = [*VERSIONED_FIELDS, *sorted((set(before) | set(after)) - set(VERSIONED_FIELDS))]
    return [name for name in names if _comparable(before.get(name)) != _comparable(after.get(name))]


def agent_version_record(
    *, agent: Agent, user_id: int | None, restored_from: AgentVersion | None = None
) -> AgentVersion | None:
    """Make a version of ``agent`` if its configuration differs from its latest version's (and
    point ``agent.current_version`` at the latest either way). Returns the new version or None.

    Preconditions: in the agent's agency transaction, right after this transaction wrote the
    agent row (its UPDATE or INSERT). That row lock is what numbers versions one at a time: a
    concurrent save of the same agent waits for it, then reads the version this one made. (The
    unique (agent, number) constraint refuses a duplicate number whatever happens.) Runs never
    take that lock: they read ``current_version_id`` with the agent row.
    """
    latest = _latest(agent)
    config = config_of(agent)
    if latest is not None and not changed_fields(latest.config, config):
        if agent.current_version_id != latest.pk:  # the row was saved from a stale copy
            Agent.objects.filter(pk=agent.pk).update(current_version=latest)
            agent.current_version = latest
        return None
    if latest is not None and agent.current_version_id not in (None, latest.pk):
        # A newer version waits for a deploy gate: a save that leaves the configuration as the
        # current version has it (a switch, a name) makes none.
        current = AgentVersion.objects.filter(pk=agent.current_version_id).only("config").first()
        if current is not None and not changed_fields(current.config, config):
            return None
    before = latest.config if latest else None
    version = _create(
        agent, config, latest, before=before, user_id=user_id, restored_from=restored_from
    )
    Agent.objects.filter(pk=agent.pk).update(current_version=version)
    agent.current_version = version
    return version


def agent_version_hold(
    *,
    agent: Agent,
    config: VersionConfig,
    base: VersionConfig,
    user_id: int | None,
    restored_from: AgentVersion | None = None,
) -> AgentVersion:
    """Record ``config`` as ``agent``'s next version without making it current: it waits for
    the agent's deploy gate (AGENTDESK_VERSION_GATES). Its change summary is what it changes from
    ``base``, the configuration the agent runs now. Preconditions: as
    :func:`agent_version_record` (the agent row written in this transaction)."""
    return _create(
        agent, config, _latest(agent), before=base, user_id=user_id, restored_from=restored_from
    )


def _latest(agent: Agent) -> AgentVersion | None:
    return (
        AgentVersion.objects.filter(agent_id=agent.pk)
        .order_by("-number")
        .only("id", "number", "config")
        .first()
    )


def _create(
    agent: Agent,
    config: VersionConfig,
    latest: AgentVersion | None,
    *,
    before: VersionConfig | None,
    user_id: int | None,
    restored_from: AgentVersion | None,
) -> AgentVersion:
    return AgentVersion.objects.create(
        agency_id=agent.agency_id,
        agent=agent,
        number=latest.number + 1 if latest else 1,
        config=config,
        change_summary=changed_fields(before, config),
        created_by_id=user_id,
        restored_from=restored_from,
    )


class VersionGate(Protocol):
    """What may hold a new version of an agent back from becoming current (evals' deploy gate,
    named in AGENTDESK_VERSION_GATES): ``holds`` says whether it does for ``agent``; ``start`` is
    given the version it holds (recorded, not current), in the save's transaction."""

    def holds(self, agent: Agent) -> bool: ...

    def refusal(self, agent: Agent, *, active: bool) -> str | None:
        """Why it could not start on ``agent`` (``active``: switched on after the save), or
        None: a save it would hold is then refused, not left waiting for nothing."""
        ...

    def start(self, *, agent: Agent, version: AgentVersion, user_id: int | None) -> None: ...


def version_gates() -> tuple[VersionGate, ...]:
    """The gates of ``settings.AGENTDESK_VERSION_GATES`` (dotted paths of classes, in order; the
    agents app names none of them), loaded once per list."""
    return _load_gates(tuple(settings.AGENTDESK_VERSION_GATES))


@functools.cache
def _load_gates(paths: tuple[str, ...]) -> tuple[VersionGate, ...]:
    gates = []
    for path in paths:
        cls = import_string(path)
        if not isinstance(cls, type) or not all(
            callable(getattr(cls, name, None)) for name in ("holds", "refusal", "start")
        ):
            raise ImproperlyConfigured(
                f"AGENTDESK_VERSION_GATES: {path} is not a class with holds, refusal and start"
            )
        gates.append(cls())
    return tuple(gates)


def version_gate(agent: Agent) -> VersionGate | None:
    """The first gate of AGENTDESK_VERSION_GATES that holds ``agent``'s new versions, or None."""
    return next((gate for gate in version_gates() if gate.holds(agent)), None)


def held_version(agent: Agent) -> AgentVersion | None:
    """The newest version of ``agent`` when it is newer than the current one (held by a gate,
    or one that failed it), else None."""
    latest = _latest(agent)
    if latest is None or latest.pk == agent.current_version_id:
        return None
    current = agent.current_version.number if agent.current_version else 0
    return latest if latest.number > current else None


# --- reads --------------------------------------------------------------------------------------


def agent_versions(*, agent: Agent) -> models.QuerySet[AgentVersion]:
    """The agent's versions, newest first (with who made them and what each restored).
    Precondition: in the agent's agency context."""
    return (
        AgentVersion.objects.filter(agent_id=agent.pk)
        .select_related("created_by", "restored_from")
        .order_by("-number")
    )


def access_agent_version(*, agent: Agent, number: int | str) -> AgentVersion:
    """Version ``number`` of ``agent``; a malformed or unknown number is the same 404.
    Precondition: ``agent`` was fetched through the tenant's access (its versions are its
    agency's)."""
    text = str(number)
    wanted = int(text) if text.isascii() and text.isdigit() and len(text) <= 9 else 0
    version = agent_versions(agent=agent).filter(number=wanted).first() if wanted > 0 else None
    if version is None:
        raise Http404("No such version of this agent.")
    return version


# --- comparing two ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DiffLine:
    kind: Literal["added", "removed", "context", "hunk"]
    text: str


@dataclass(frozen=True, slots=True)
class FieldChange:
    """One configuration field that differs between two versions. ``lines`` is a line diff
    (difflib) for long or multi-line values, such as the system prompt; otherwise ``before``
    and ``after`` are shown side by side."""

    name: str
    label: str
    before: str
    after: str
    lines: list[DiffLine] = field(default_factory=list)


MISSING = "(not set in this version)"


def field_label(name: str) -> str:
    """A configuration field's name as the agent editor labels it."""
    model_field = _FIELDS.get(name)
    label = str(model_field.verbose_name) if model_field is not None else name.replace("_", " ")
    words = [ACRONYMS.get(word, word) for word in label.split(" ")]
    return " ".join([words[0][:1].upper() + words[0][1:], *words[1:]])


ACRONYMS = {"llm": "LLM", "url": "URL"}
NONE = "(none)"


def _text(value: Any, present: bool) -> str:
    """A value as the diff shows it: text as it is; a list of names comma-separated, or one item
    a line when that is long (constraints); other JSON indented."""
    if not present:
        return MISSING
    if value in ("", []):
        return NONE
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        joined = ", ".join(value)
        short = len(joined) <= SHORT_TEXT and not any("," in item for item in value)
        return joined if short else "\n".join(value)
    return json.dumps(value, indent=2 if value else None, ensure_ascii=False, default=str)


def version_diff(older: VersionConfig, newer: VersionConfig) -> list[FieldChange]:
    """The fields that differ from ``older`` to ``newer``, in the configuration's order."""
    changes = []
    for name in changed_fields(older, newer):
        before = _text(older.get(name), name in older)
        after = _text(newer.get(name), name in newer)
        lines: list[DiffLine] = []
        if max(len(before), len(after)) > SHORT_TEXT or "\n" in before + after:
            lines = _line_diff(before, after)
        changes.append(FieldChange(name, field_label(name), before, after, lines))
    return changes


def _line_diff(before: str, after: str) -> list[DiffLine]:
    diff = difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=2)
    lines = []
    for line in itertools.islice(diff, 2, None):  # after the "---" / "+++" file headers
        if line.startswith("@@"):
            lines.append(DiffLine("hunk", line))
        elif line.startswith("+"):
            lines.append(DiffLine("added", line[1:]))
        elif line.startswith("-"):
            lines.append(DiffLine("removed", line[1:]))
        else:
            lines.append(DiffLine("context", line[1:]))
    return lines
