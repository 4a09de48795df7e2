"""Live updates: messages sent to Channels groups after the transaction that wrote them commits.

The package, by concern:

- :mod:`core.realtime.groups`: the groups a message goes to (a run's watchers, an agency, one
  member);
- :mod:`core.realtime.credentials`: telling open sockets that their credential changed (its
  groups, messages and reasons);
- :mod:`core.realtime.publishing`: the process's publisher thread, which sends what is queued a
  batch at a time after the commit (``broadcast_on_commit``, ``broadcast``, ``flush``), and the
  text of a model call in progress (``TextStream``), sent at once and never persisted;
- :mod:`core.realtime.listening`: whether anyone watches a group (``Listeners``), kept fresh in
  the background for the process's runs. Imported from there, not from here: the process's one
  watch (``listening.listeners``) is what tests and benchmarks replace.

The names most callers use (``realtime.broadcast_on_commit``, ``realtime.execution_group``...)
are re-exported here.
"""

from __future__ import annotations

from core.realtime.credentials import (
    CREDENTIAL_ENDED,
    CREDENTIAL_MESSAGE,
    CREDENTIAL_RECHECK_MESSAGE,
    CREDENTIAL_REMOVED,
    CREDENTIAL_ROLE_CHANGED,
    agency_credentials_group,
    api_key_group,
    credential_changed_on_commit,
    credential_recheck_on_commit,
    login_group,
    session_group,
)
from core.realtime.groups import agency_group, execution_group, user_group
from core.realtime.publishing import TextStream, broadcast, broadcast_on_commit, flush

__all__ = [
    "CREDENTIAL_ENDED",
    "CREDENTIAL_MESSAGE",
    "CREDENTIAL_RECHECK_MESSAGE",
    "CREDENTIAL_REMOVED",
    "CREDENTIAL_ROLE_CHANGED",
    "TextStream",
    "agency_credentials_group",
    "agency_group",
    "api_key_group",
    "broadcast",
    "broadcast_on_commit",
    "credential_changed_on_commit",
    "credential_recheck_on_commit",
    "execution_group",
    "flush",
    "login_group",
    "session_group",
    "user_group",
]
