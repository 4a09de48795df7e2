"""What other apps show on the agents app's admin pages, registered by them: the agents admin
names no feature app (flow, memory, teams, approvals fill these from their own admin modules,
which Django's admin autodiscovery imports).

    from agents.admin import panels

    panels.RUN_PANELS.register(
        panels.RunPanel(order=20, name="flow_analysis", title="Flow analysis",
                        label="Completeness", render=completeness_panel)
    )

Each entry has a ``name`` (its read-only field, so its row's CSS class is ``field-<name>``; a
second registration of a name replaces the first) and an ``order``: entries of a kind are shown
by ascending order. Pages read the registries on each request, so an entry registered after the
admin classes were built still shows.

- :data:`RUN_PANELS`: a fieldset each on the run page, between "Input" and "Outcome".
- :data:`RUN_STEP_ACTIONS`: links on the steps of the run page's timeline (which the page's
  script draws as the steps arrive: an entry says where it applies, the script applies it).
- :data:`RUN_LINKS`: the run page's "Related" links, after the steps, tool calls and trigger log.
- :data:`RUN_URLS`: admin URLs under the run page (``admin:agents_execution_*``).
- :data:`AGENT_PANELS`: read-only fields of the agent page, each right above the agent field
  ``before`` (in that field's tab).
- :data:`TOOL_NOTES`: what the agent page's tool preview says beside an offered tool (e.g. that
  a call waits for an approval); the non-empty notes, joined.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from django.utils.safestring import SafeString

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin
    from django.urls import URLPattern

    from agents.models import Agent, Execution
    from tools.models import Tool

Shown = SafeString | str


@dataclass(frozen=True)
class RunPanel:
    order: int
    name: str
    title: str  # the fieldset's
    label: str  # the row's
    render: Callable[[Execution], Shown]
    # Whether the run's page has the fieldset at all (None: always): a panel only some runs
    # fill says so, instead of an empty section on every run's page.
    shown: Callable[[Execution], bool] | None = None


@dataclass(frozen=True)
class StepAction:
    """A link on some steps of the run page's timeline. The timeline is drawn in the browser as
    steps arrive, so the rule of where the link applies travels with the page as data, and the
    link appears on a run that ends while it is watched, without a reload."""

    order: int
    name: str
    label: str
    # The link for the run, with STEP_PLACEHOLDER where a step's number goes.
    url: Callable[[Execution], str]
    step_types: frozenset[str]
    ended_only: bool  # only once the run has ended (completed, failed, cancelled, timed out)
    first_step: bool  # also on the run's step 1
    needs_write: bool  # only for members who may change the agency's runs

    def as_json(self, execution: Execution) -> dict[str, Any]:
        return {
            "label": self.label,
            "url": self.url(execution),
            "placeholder": STEP_PLACEHOLDER,
            "step_types": sorted(self.step_types),
            "ended_only": self.ended_only,
            "first_step": self.first_step,
        }


STEP_PLACEHOLDER = "STEP"


@dataclass(frozen=True)
class RunLink:
    order: int
    name: str
    render: Callable[[Execution], Shown]


@dataclass(frozen=True)
class RunUrls:
    order: int
    name: str
    urls: Callable[[ModelAdmin[Any]], list[URLPattern]]


@dataclass(frozen=True)
class AgentPanel:
    order: int
    name: str
    label: str
    before: str  # the agent field it is shown above
    render: Callable[[Agent], Shown]


@dataclass(frozen=True)
class ToolNote:
    order: int
    name: str
    # (agency, tool, the patterns' constraints) -> a note, or "" for none
    note: Callable[[uuid.UUID, Tool, Sequence[Any]], str]


class _Entry(Protocol):
    @property
    def order(self) -> int: ...
    @property
    def name(self) -> str: ...


class Registry[E: _Entry]:
    """Entries of one kind, by name; iterated by ascending ``order`` (then name)."""

    def __init__(self) -> None:
        self._entries: dict[str, E] = {}

    def register(self, entry: E) -> E:
        self._entries[entry.name] = entry
        return entry

    def unregister(self, name: str) -> None:
        self._entries.pop(name, None)

    def get(self, name: str) -> E | None:
        return self._entries.get(name)

    def __iter__(self) -> Iterator[E]:
        return iter(sorted(self._entries.values(), key=lambda e: (e.order, e.name)))

    def names(self) -> list[str]:
        return [entry.name for entry in self]


RUN_PANELS: Registry[RunPanel] = Registry()
RUN_STEP_ACTIONS: Registry[StepAction] = Registry()
RUN_LINKS: Registry[RunLink] = Registry()
RUN_URLS: Registry[RunUrls] = Registry()
AGENT_PANELS: Registry[AgentPanel] = Registry()
TOOL_NOTES: Registry[ToolNote] = Registry()


def display(label: str, render: Callable[[Any], Shown], *, unsaved: Shown) -> Callable[..., Shown]:
    """A registered field as the admin calls a display method: ``unsaved`` for a page of an
    object not saved yet."""

    def show(obj: Any) -> Shown:
        return unsaved if obj is None or obj.pk is None else render(obj)

    show.short_description = label  # type: ignore[attr-defined]
    return show


def with_panels(
    fieldsets: Sequence[tuple[str | None, dict[str, Any]]],
) -> list[tuple[str | None, dict[str, Any]]]:
    """``fieldsets`` of the agent page with each registered agent panel above its field."""
    placed = []
    for title, options in fieldsets:
        fields: list[Any] = []
        for field in options.get("fields", []):
            fields += [p.name for p in AGENT_PANELS if p.before == field]
            fields.append(field)
        placed.append((title, {**options, "fields": fields}))
    return placed


def tool_notes(agency_id: uuid.UUID, tool: Tool, constraints: Sequence[Any]) -> str:
    notes = (entry.note(agency_id, tool, constraints) for entry in TOOL_NOTES)
    return "; ".join(note for note in notes if note)


class RegisteredFields:
    """A model admin (or inline) mixin: the name of an entry of ``registries`` resolves as a
    display method of this admin (Django finds a read-only field's value and label so)."""

    registries: tuple[Registry[Any], ...] = ()
    unsaved: Shown = "-"

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("_"):
            for registry in type(self).registries:
                entry = registry.get(name)
                if entry is not None:
                    return display(entry.label, entry.render, unsaved=type(self).unsaved)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
