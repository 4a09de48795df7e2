"""The Channels groups live updates go to: one run's watchers, one agency's staff, one member.

Group names are Redis channel names (the pub/sub layer subscribes one per group): the sockets of
live/ join them, and the writers of what they announce publish to them (core.realtime.publishing).
"""

from __future__ import annotations

import uuid


def execution_group(execution_id: uuid.UUID | str) -> str:
    return f"execution.{execution_id}"


def agency_group(agency_id: uuid.UUID | str) -> str:
    return f"agency.{agency_id}"


def user_group(agency_id: uuid.UUID | str, user_id: int) -> str:
    """One member of one agency: what is meant for that person only (a notification to them)."""
    return f"agency.{agency_id}.user.{user_id}"
