"""Telling open sockets that the credential they were authenticated with changed.

Each credential has a group its sockets join (an API key, a login, a session, an agency's
sockets whatever opened them); a change that ends or alters one is published to it once the change
commits, and live/authenticating.py closes or re-checks the sockets that get it.
"""

from __future__ import annotations

import hashlib
import uuid

from core.realtime.publishing import broadcast_on_commit

# The credentials open sockets were authenticated with: a change that ends or alters one is
# published to its group, and every socket it opened closes (live/authenticating.py; the close
# codes are in docs/live-protocol.md). ``change`` says what happened, not how sockets react.
CREDENTIAL_MESSAGE = "credential.changed"
CREDENTIAL_ENDED = "ended"  # an API key revoked, a session logged out: refused from now on
CREDENTIAL_REMOVED = "removed"  # a login no longer a member of the agency it watched
CREDENTIAL_ROLE_CHANGED = "role_changed"  # a member's role changed: their rights did
# Something a credential depends on changed, and only reading it again tells which sockets it
# ends (a password changed: the session that changed it lives on; a login or an agency
# deactivated): the sockets told read theirs at once, not at their next periodic re-read.
CREDENTIAL_RECHECK_MESSAGE = "credential.recheck"


def api_key_group(prefix: str) -> str:
    """Sockets opened with the API key ``adk_<prefix>_…`` (the prefix is unique and visible)."""
    return f"credential.key.{prefix}"


def login_group(user_id: int) -> str:
    """Sockets opened by any session of the login ``user_id``."""
    return f"credential.user.{user_id}"


def agency_credentials_group(agency_id: uuid.UUID | str) -> str:
    """Every socket watching agency ``agency_id``, whatever credential opened it."""
    return f"credential.agency.{agency_id}"


def session_group(session_key: str) -> str:
    """Sockets opened with one session. Hashed: a session key is a bearer secret, and group
    names are Redis channel names, visible to anything that may list them."""
    return f"credential.session.{hashlib.sha256(session_key.encode()).hexdigest()[:32]}"


def credential_changed_on_commit(groups: list[str], *, change: str, reason: str) -> None:
    """Tell the sockets of ``groups`` that their credential ``change``-d (a ``CREDENTIAL_*``),
    once the change commits; ``reason`` is shown to the client as the close reason."""
    broadcast_on_commit(groups, {"type": CREDENTIAL_MESSAGE, "change": change, "reason": reason})


def credential_recheck_on_commit(groups: list[str], *, reason: str) -> None:
    """Tell the sockets of ``groups`` to read their credential again, once the change commits
    (CREDENTIAL_RECHECK_MESSAGE); ``reason`` is for the log."""
    broadcast_on_commit(groups, {"type": CREDENTIAL_RECHECK_MESSAGE, "reason": reason})
