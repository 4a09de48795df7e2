"""Notices for the staff inbox: things a person should know that ask no decision (a canary
version that rolled back by itself, evals/). Apps register a source; the inbox
(approvals/inbox) lists what the sources give, newest first. Core names no feature app.

A source is ``def source(agency_id) -> list[Notice]``, called inside the agency's tenant context
on each inbox page view: keep it to one indexed query."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Notice:
    title: str
    text: str
    url: str  # where to read more (an admin page)
    at: datetime.datetime


type NoticeSource = Callable[[uuid.UUID], list[Notice]]

_SOURCES: dict[str, NoticeSource] = {}


def register(name: str, source: NoticeSource) -> None:
    """Add ``source`` (a second registration of ``name`` replaces the first)."""
    _SOURCES[name] = source


def notices(agency_id: uuid.UUID) -> list[Notice]:
    """Every source's notices for the agency, newest first."""
    found = [notice for source in _SOURCES.values() for notice in source(agency_id)]
    return sorted(found, key=lambda notice: notice.at, reverse=True)
