"""Run-ended listeners (docs/decisions/0010-run-lifecycle.md): what the features do as a run
ends, called by :func:`agents.lifecycle.finish_execution` inside the transaction that ends it,
in the order of ``settings.AGENTDESK_RUN_ENDED_LISTENERS`` (dotted paths of callables, loaded
once with ``import_string``, as ``MIDDLEWARE``). The lifecycle never imports a feature: the
setting names them.

A listener is ``def listener(ended: RunEnded) -> None``. It runs in the ending transaction, so
what it writes commits or rolls back with the end; one that raises rolls the end back (the
run stays as it was, and whoever ended it gets the error).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from agents.models import Execution


@dataclass(frozen=True, slots=True)
class RunEnded:
    """A run ending, as its listeners see it: ``execution`` has its end set (status, stop
    reason, output or error, ``completed_at``, ``duration_ms``), the row not yet written."""

    execution: Execution
    from_status: str  # the status it ended from
    # Its own worker ended it in one of its steps, holding the run: nothing of it waits for a
    # person then. False for every other end (a cancel, an expiry, a decision, a delivery's claim
    # that finds the run may not go on), which may find things still waiting.
    by_worker: bool


type RunEndedListener = Callable[[RunEnded], None]


def listeners() -> tuple[RunEndedListener, ...]:
    """The listeners of ``settings.AGENTDESK_RUN_ENDED_LISTENERS``, in order (loaded once per
    list, so ``override_settings`` gives a test its own)."""
    return _load(tuple(settings.AGENTDESK_RUN_ENDED_LISTENERS))


@functools.cache
def _load(paths: tuple[str, ...]) -> tuple[RunEndedListener, ...]:
    loaded = tuple(import_string(path) for path in paths)
    for path, listener in zip(paths, loaded, strict=True):
        if not callable(listener):
            raise ImproperlyConfigured(f"AGENTDESK_RUN_ENDED_LISTENERS: {path} is not callable")
    return loaded


def run_ended(ended: RunEnded) -> None:
    """Call every listener with ``ended``, in order."""
    for listener in listeners():
        listener(ended)
