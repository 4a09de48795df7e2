"""Calendar tools: creating events, and availability computed from real overlapping events."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from agents.models import Execution
from core import tenancy
from core.models import Event
from crm.models import CalendarEvent
from tests.crm.factories import CalendarEventFactory, ContactFactory
from tests.factories import MembershipFactory
from tests.tools.builtin.conftest import call, call_error
from tools.builtin.calendar import MAX_EVENTS_SCANNED, free_gaps, merge_intervals
from tools.handlers import ToolContext

UTC = datetime.UTC
DAY = datetime.datetime(2030, 3, 4, tzinfo=UTC)


def at(hour: float) -> datetime.datetime:
    return DAY + datetime.timedelta(hours=hour)


def _event(execution: Execution, start: float, end: float, **extra: Any) -> CalendarEvent:
    contact = ContactFactory.create(agency=execution.agency)
    return CalendarEventFactory.create(contact=contact, start_at=at(start), end_at=at(end), **extra)


def _check(ctx: ToolContext, start: float, end: float, **extra: Any) -> dict[str, Any]:
    args = {"start_time": at(start).isoformat(), "end_time": at(end).isoformat(), **extra}
    return call(ctx, "calendar_check_availability", args)


def _hours(intervals: list[dict[str, str]]) -> list[tuple[float, float]]:
    def hours(value: str) -> float:
        return (datetime.datetime.fromisoformat(value) - DAY).total_seconds() / 3600

    return [(hours(i["start"]), hours(i["end"])) for i in intervals]


def test_create_event_links_the_attendee_contact_and_emits(
    ctx: ToolContext, execution: Execution
) -> None:
    contact = ContactFactory.create(agency=execution.agency, email="ada@example.com")

    output = call(
        ctx,
        "calendar_create_event",
        {
            "title": "Demo",
            "start_time": "2030-03-04T10:00:00+01:00",
            "end_time": "2030-03-04T11:00:00+01:00",
            "attendees": ["ADA@example.com"],
        },
    )

    with tenancy.agency_context(ctx.agency_id):
        event = CalendarEvent.objects.get(id=output["event"]["id"])
        emitted = Event.objects.filter(event_type="calendar.event.created").count()
    assert (event.start_at, event.end_at) == (at(9), at(10))
    assert event.contact_id == contact.id
    assert event.agent_id == ctx.agent_id
    assert emitted == 1
    assert output["overlaps_with"] == []


def test_create_event_reports_overlaps_with_existing_events(
    ctx: ToolContext, execution: Execution
) -> None:
    existing = _event(execution, 9, 10)

    output = call(
        ctx,
        "calendar_create_event",
        {"title": "Clash", "start_time": at(9.5).isoformat(), "end_time": at(11).isoformat()},
    )

    assert [o["id"] for o in output["overlaps_with"]] == [str(existing.id)]


@pytest.mark.parametrize(
    ("start", "end", "validate"),
    [
        ("2030-03-04T10:00:00Z", "2030-03-04T10:00:00Z", True),  # empty
        ("2030-03-04T11:00:00Z", "2030-03-04T10:00:00Z", True),  # backwards
        ("2030-03-04T10:00:00", "2030-03-04T11:00:00", False),  # no timezone
    ],
)
def test_create_event_needs_an_aware_end_after_start(
    ctx: ToolContext, start: str, end: str, validate: bool
) -> None:
    error = call_error(
        ctx,
        "calendar_create_event",
        {"title": "Bad", "start_time": start, "end_time": end},
        validate=validate,
    )

    assert error.code == "invalid_argument"


def test_availability_touching_events_leave_the_slot_free(
    ctx: ToolContext, execution: Execution
) -> None:
    _event(execution, 9, 10)
    _event(execution, 11, 12)

    result = _check(ctx, 10, 11)

    assert result["is_free"] is True
    assert result["busy"] == []
    assert _hours(result["free"]) == [(10, 11)]


def test_availability_contained_and_overlapping_events_merge_into_busy_blocks(
    ctx: ToolContext, execution: Execution
) -> None:
    _event(execution, 9, 12)
    _event(execution, 10, 11)  # contained
    _event(execution, 11.5, 13)  # overlapping
    _event(execution, 13, 14)  # touching: joins the block
    _event(execution, 15, 16)

    result = _check(ctx, 8, 18)

    assert result["is_free"] is False
    assert _hours(result["busy"]) == [(9, 14), (15, 16)]
    assert _hours(result["free"]) == [(8, 9), (14, 15), (16, 18)]
    assert result["conflict_count"] == 5


def test_availability_clips_events_to_the_window(ctx: ToolContext, execution: Execution) -> None:
    _event(execution, 7, 9)

    result = _check(ctx, 8, 10)

    assert _hours(result["busy"]) == [(8, 9)]
    assert _hours(result["free"]) == [(9, 10)]


def test_availability_ignores_cancelled_events_and_other_agencies(
    ctx: ToolContext, execution: Execution
) -> None:
    _event(execution, 9, 10, status="cancelled")
    other_contact = ContactFactory.create()  # agency B
    CalendarEventFactory.create(contact=other_contact, start_at=at(9), end_at=at(10))

    result = _check(ctx, 8, 11)

    assert result["is_free"] is True
    assert result["conflicts"] == []


def test_availability_answers_in_the_timezone_asked(ctx: ToolContext, execution: Execution) -> None:
    _event(execution, 9, 10)

    result = call(
        ctx,
        "calendar_check_availability",
        {"start_time": "2030-03-04T09:00:00+02:00", "end_time": "2030-03-04T13:00:00+02:00"},
    )

    assert result["busy"] == [
        {"start": "2030-03-04T11:00:00+02:00", "end": "2030-03-04T12:00:00+02:00"}
    ]


def test_availability_for_one_member_counts_their_organised_and_attended_events(
    ctx: ToolContext, execution: Execution
) -> None:
    member = MembershipFactory.create(agency=execution.agency)
    _event(execution, 9, 10, organizer=member.user)
    _event(execution, 11, 12, attendees=[member.user.email])
    _event(execution, 13, 14)  # someone else's

    result = _check(ctx, 8, 18, user_id=str(member.user_id))

    assert _hours(result["busy"]) == [(9, 10), (11, 12)]


def test_availability_refuses_a_reversed_window(ctx: ToolContext) -> None:
    args = {"start_time": at(10).isoformat(), "end_time": at(9).isoformat()}

    assert call_error(ctx, "calendar_check_availability", args).code == "invalid_argument"


def test_interval_helpers() -> None:
    merged = merge_intervals([(at(3), at(4)), (at(1), at(2)), (at(2), at(2.5))])

    assert merged == [(at(1), at(2.5)), (at(3), at(4))]
    assert free_gaps((at(0), at(5)), merged) == [(at(0), at(1)), (at(2.5), at(3)), (at(4), at(5))]
    assert free_gaps((at(0), at(5)), []) == [(at(0), at(5))]


def test_create_event_stores_attendees_lower_cased(ctx: ToolContext) -> None:
    output = call(
        ctx,
        "calendar_create_event",
        {
            "title": "Review",
            "start_time": at(9).isoformat(),
            "end_time": at(10).isoformat(),
            "attendees": ["Ada.Lovelace@Example.COM", "ada.lovelace@example.com", "Bob@x.org"],
        },
    )

    with tenancy.agency_context(ctx.agency_id):
        stored = CalendarEvent.objects.get(id=output["event"]["id"]).attendees
    assert stored == output["event"]["attendees"] == ["ada.lovelace@example.com", "bob@x.org"]


@pytest.mark.parametrize(
    ("member_email", "attendee"),
    [
        ("ada.lovelace@example.com", "Ada.Lovelace@Example.COM"),  # e.g. typed in the admin
        ("Ada.Lovelace@Example.COM", "ada.lovelace@example.com"),
    ],
)
def test_availability_finds_attended_events_whatever_the_email_case(
    ctx: ToolContext, execution: Execution, member_email: str, attendee: str
) -> None:
    member = MembershipFactory.create(agency=execution.agency, user__email=member_email)
    _event(execution, 9, 10, attendees=["someone@example.com", attendee])

    result = _check(ctx, 8, 12, user_id=str(member.user_id))

    assert result["is_free"] is False
    assert _hours(result["busy"]) == [(9, 10)]
    assert _hours(result["free"]) == [(8, 9), (10, 12)]


def test_availability_for_a_member_created_event_is_busy_when_asked_by_email(
    ctx: ToolContext, execution: Execution
) -> None:
    MembershipFactory.create(agency=execution.agency, user__email="grace@example.com")
    call(
        ctx,
        "calendar_create_event",
        {
            "title": "Sync",
            "start_time": at(14).isoformat(),
            "end_time": at(15).isoformat(),
            "attendees": ["GRACE@Example.com"],
        },
    )

    result = _check(ctx, 13, 16, user_id="Grace@EXAMPLE.com")

    assert _hours(result["busy"]) == [(14, 15)]


def test_availability_cut_at_the_scan_cap_reports_no_free_time_past_the_cut(
    ctx: ToolContext, execution: Execution
) -> None:
    with tenancy.agency_context(ctx.agency_id):
        CalendarEvent.objects.bulk_create(
            CalendarEvent(agency_id=ctx.agency_id, title=f"Hold {n}", start_at=at(9), end_at=at(10))
            for n in range(MAX_EVENTS_SCANNED)
        )
        # The first event past the cap: busy time the scan never sees.
        CalendarEvent.objects.create(
            agency_id=ctx.agency_id, title="Late", start_at=at(12), end_at=at(13)
        )

    result = _check(ctx, 8, 18)

    assert result["truncated"] is True
    assert result["is_free"] is False
    assert _hours(result["busy"]) == [(9, 10)]
    # Free time is only claimed where every event was seen: before the first unscanned start.
    assert _hours(result["free"]) == [(8, 9), (10, 12)]
    assert datetime.datetime.fromisoformat(result["complete_until"]) == at(12)
    assert "complete_until" in result["note"]


@pytest.mark.parametrize(
    ("start", "end"),
    [
        # Year 10000 in UTC: PostgreSQL stores it, Python cannot read it back.
        ("9999-12-31T20:00:00-05:00", "9999-12-31T22:00:00-05:00"),
        # Before year 1 in UTC.
        ("0001-01-01T00:00:00+05:00", "0001-01-01T01:00:00+05:00"),
        ("1899-12-31T23:00:00Z", "1900-01-01T00:30:00Z"),
        ("2200-12-31T23:30:00Z", "2201-01-01T00:30:00Z"),
        ("1900-01-01T00:30:00+01:00", "1900-01-01T02:00:00+01:00"),  # 1899 in UTC
    ],
)
def test_create_event_refuses_dates_outside_1900_to_2200_utc_and_stores_nothing(
    ctx: ToolContext, start: str, end: str
) -> None:
    error = call_error(
        ctx, "calendar_create_event", {"title": "Far", "start_time": start, "end_time": end}
    )

    assert error.code == "invalid_argument"
    assert "1900-01-01T00:00:00Z and 2200-12-31T23:59:59Z" in error.message
    with tenancy.agency_context(ctx.agency_id):
        assert not CalendarEvent.objects.exists()
    # The table stays readable: availability still answers.
    assert _check(ctx, 9, 10)["is_free"] is True


def test_create_event_accepts_the_edges_of_the_allowed_years(ctx: ToolContext) -> None:
    for start, end in [
        ("1900-01-01T00:00:00Z", "1900-01-01T01:00:00Z"),
        ("2200-12-31T22:00:00Z", "2200-12-31T23:59:59Z"),
    ]:
        call(ctx, "calendar_create_event", {"title": "Edge", "start_time": start, "end_time": end})

    with tenancy.agency_context(ctx.agency_id):
        assert CalendarEvent.objects.count() == 2
