"""Calendar tools: scheduling events and checking availability on the agency's calendar.

Intervals are half-open, ``[start, end)``: a meeting ending at 10:00 does not conflict with one
starting at 10:00. Cancelled events never make anyone busy; tentative ones do.

Attendee e-mails are compared case-insensitively: ``calendar_create_event`` stores them
lower-cased, and availability lower-cases the stored array in SQL too, because rows written by
the admin (or before this rule) keep whatever case they were typed in.
"""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from django.contrib.postgres.fields import ArrayField
from django.db.models import Func, Q, QuerySet, TextField

from crm.models import CalendarEvent, Contact, EventStatus
from tools.builtin import _args
from tools.builtin._args import INVALID
from tools.handlers import ToolContext, ToolError
from tools.registry import handler

MAX_EVENT_LENGTH = datetime.timedelta(days=14)
MAX_WINDOW = datetime.timedelta(days=62)
MAX_EVENTS_SCANNED = 2_000  # per availability check; past the cut nothing is reported free
MAX_LISTED = 20  # conflicting events listed in an answer
MAX_ATTENDEES = 100

Interval = tuple[datetime.datetime, datetime.datetime]


def _window(args: dict[str, Any], limit: datetime.timedelta) -> Interval:
    start = _args.parse_datetime(args.get("start_time"), "start_time")
    end = _args.parse_datetime(args.get("end_time"), "end_time")
    if end <= start:
        raise ToolError(INVALID, "'end_time' must be after 'start_time'.")
    if end - start > limit:
        raise ToolError(INVALID, f"The time range may span at most {limit.days} days.")
    return start, end


def _overlapping(
    ctx: ToolContext, start: datetime.datetime, end: datetime.datetime
) -> QuerySet[CalendarEvent]:
    """Events of the agency that share some time with ``[start, end)`` and are not cancelled."""
    return (
        CalendarEvent.objects.filter(agency_id=ctx.agency_id, start_at__lt=end, end_at__gt=start)
        .exclude(status=EventStatus.CANCELLED)
        .order_by("start_at", "end_at", "id")
    )


def merge_intervals(intervals: list[Interval]) -> list[Interval]:
    """Sorted, merged busy intervals; touching intervals (one ends as the next starts) join."""
    merged: list[Interval] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def free_gaps(window: Interval, busy: list[Interval]) -> list[Interval]:
    """The parts of ``window`` not covered by the merged ``busy`` intervals."""
    gaps: list[Interval] = []
    cursor = window[0]
    for start, end in busy:
        if start > cursor:
            gaps.append((cursor, start))
        cursor = max(cursor, end)
    if cursor < window[1]:
        gaps.append((cursor, window[1]))
    return gaps


def _as_dicts(intervals: list[Interval], tz: datetime.tzinfo | None) -> list[dict[str, str]]:
    """In the timezone the question was asked in."""
    return [
        {"start": start.astimezone(tz).isoformat(), "end": end.astimezone(tz).isoformat()}
        for start, end in intervals
    ]


def _event_summary(event: CalendarEvent) -> dict[str, Any]:
    return {
        "id": str(event.id),
        "title": _args.truncate(event.title, 120),
        "start": _args.iso(event.start_at),
        "end": _args.iso(event.end_at),
        "status": event.status,
    }


def _contact_for(ctx: ToolContext, args: dict[str, Any], attendees: list[str]) -> uuid.UUID | None:
    """The contact the event is with: ``contact_id`` if given, else the first attendee's."""
    if args.get("contact_id"):
        pk = _args.parse_uuid(args["contact_id"], "contact_id")
        if not Contact.objects.filter(agency_id=ctx.agency_id, id=pk).exists():
            raise ToolError("not_found", f"No contact with id {pk} in this agency.")
        return pk
    if not attendees:
        return None
    match = Q()
    for address in attendees:
        match |= Q(email__iexact=address)
    found = Contact.objects.filter(match, agency_id=ctx.agency_id).order_by("created_at")
    return found.values_list("id", flat=True).first()


@handler("calendar_create_event")
def calendar_create_event(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    title = _args.text(args, "title", max_length=300, required=True)
    start, end = _window(args, MAX_EVENT_LENGTH)
    # Stored lower-cased: one spelling per address, whatever case the model wrote it in.
    attendees = [
        address.lower()
        for address in _args.email_list(
            args.get("attendees"), "attendees", max_items=MAX_ATTENDEES, required=False
        )
    ]
    description = _args.text(args, "description", max_length=20_000)
    conflicts = list(_overlapping(ctx, start, end)[:MAX_LISTED])
    event = CalendarEvent.objects.create(
        agency_id=ctx.agency_id,
        site_id=ctx.site_id,
        title=title,
        description=description,
        start_at=start,
        end_at=end,
        attendees=attendees,
        contact_id=_contact_for(ctx, args, attendees),
        status=EventStatus.CONFIRMED,
        agent_id=ctx.agent_id,
    )
    payload = {"event_id": str(event.id), "start": _args.iso(start), "end": _args.iso(end)}
    _args.emit(
        ctx,
        "calendar.event.created",
        payload,
        module="calendar",
        entity="event",
        entity_id=event.id,
    )
    return {
        "event": {
            **_event_summary(event),
            "attendees": attendees,
            "contact_id": str(event.contact_id) if event.contact_id else None,
        },
        # Informative, not blocking: double-booking can be intended (e.g. an internal hold).
        "overlaps_with": [_event_summary(other) for other in conflicts],
    }


class _LowerCased(Func):
    """An e-mail array with every item lower-cased: ``array(SELECT lower(a) FROM unnest(..))``."""

    template = "array(SELECT lower(a) FROM unnest(%(expressions)s) AS a)"
    output_field = ArrayField(TextField())


def _busy_for(
    ctx: ToolContext, events: QuerySet[CalendarEvent], user_ref: object
) -> QuerySet[CalendarEvent]:
    """Those of ``events`` that make one member busy: they organise or attend (by e-mail).

    The e-mail is compared lower-cased against the stored array lower-cased in SQL, not against
    the stored spelling: the admin writes attendees as typed, and rows from before
    ``calendar_create_event`` normalised them exist. That is no index lookup (there is none on
    ``attendees`` anyway), but it only runs on the rows the (agency, start, end) range index
    already narrowed to the window.
    """
    user_id, email = _args.member_user(ctx, user_ref, "user_id")
    attending = Q(attending_lower__contains=[email.lower()]) if email else Q(pk__in=[])
    return events.alias(attending_lower=_LowerCased("attendees")).filter(
        Q(organizer_id=user_id) | attending
    )


@handler("calendar_check_availability")
def calendar_check_availability(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    window = _window(args, MAX_WINDOW)
    tz = window[0].tzinfo
    events = _overlapping(ctx, *window)
    if args.get("user_id"):
        events = _busy_for(ctx, events, args["user_id"])
    scanned = list(events[: MAX_EVENTS_SCANNED + 1])
    truncated = len(scanned) > MAX_EVENTS_SCANNED
    # Events come by start time, so when the scan is cut every event starting before the first
    # unscanned one was seen: busy and free are exact up to that start and unknown after it.
    # Reporting the rest of the window as free would let an agent double-book.
    known_until = max(scanned[MAX_EVENTS_SCANNED].start_at, window[0]) if truncated else window[1]
    scanned = scanned[:MAX_EVENTS_SCANNED]
    busy = merge_intervals(
        [(max(e.start_at, window[0]), min(e.end_at, window[1])) for e in scanned]
    )
    result: dict[str, Any] = {
        "window": {"start": _args.iso(window[0]), "end": _args.iso(window[1])},
        "is_free": not busy,
        "busy": _as_dicts(busy, tz),
        "free": _as_dicts(free_gaps((window[0], known_until), busy), tz),
        "conflicts": [_event_summary(e) for e in scanned[:MAX_LISTED]],
        "conflict_count": len(scanned),
        "truncated": truncated,
    }
    if truncated:
        result["complete_until"] = known_until.astimezone(tz).isoformat()
        result["note"] = (
            f"More than {MAX_EVENTS_SCANNED} events overlap the window, so only the time before "
            "'complete_until' was checked: 'free' lists free time up to then only, and 'busy' "
            "may miss events after it. Ask again from 'complete_until' (or for one user_id) "
            "to check the rest."
        )
    return result
