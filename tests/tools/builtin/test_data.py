"""data_query / data_aggregate: structured filters over allow-listed entities, one agency only."""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest

from agents.models import Execution
from tests.crm.factories import (
    CalendarEventFactory,
    ContactFactory,
    EmailMessageFactory,
    FormSubmissionFactory,
    NoteFactory,
    TaskFactory,
)
from tests.tools.builtin.conftest import call, call_error
from tools.builtin._entities import ENTITIES
from tools.handlers import ToolContext

START = datetime.datetime(2030, 1, 1, 9, tzinfo=datetime.UTC)


@pytest.fixture
def contacts(execution: Execution) -> dict[str, Any]:
    agency = execution.agency
    return {
        "ada": ContactFactory.create(
            agency=agency, first_name="Ada", email="ada@a.example", status="customer", tags=["vip"]
        ),
        "bob": ContactFactory.create(agency=agency, first_name="Bob", email="bob@a.example"),
        "cy": ContactFactory.create(agency=agency, first_name="Cy", email="", company="Cyco"),
        "other": ContactFactory.create(first_name="Ada", email="ada@b.example"),  # agency B
    }


def _names(result: dict[str, Any]) -> list[str]:
    return [row["first_name"] for row in result["rows"]]


@pytest.mark.usefixtures("contacts")
@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"first_name": "Ada"}, ["Ada"]),
        ({"status": {"neq": "customer"}}, ["Bob", "Cy"]),
        ({"email": {"icontains": "A.EXAMPLE"}}, ["Ada", "Bob"]),
        ({"first_name": {"in": ["Bob", "Cy", "Zed"]}}, ["Bob", "Cy"]),
        ({"tags": {"contains": "vip"}}, ["Ada"]),
        ({"company": {"contains": "Cy"}, "status": "lead"}, ["Cy"]),
        ({"created_at": {"gte": "2000-01-01"}, "first_name": {"neq": "Cy"}}, ["Ada", "Bob"]),
        ({"last_contacted_at": None}, ["Ada", "Bob", "Cy"]),
        ({"last_contacted_at": {"isnull": False}}, []),
    ],
)
def test_query_contacts_with_filters(
    ctx: ToolContext, filters: dict[str, Any], expected: list[str]
) -> None:
    result = call(
        ctx, "data_query", {"entity_type": "contacts", "filters": filters, "order_by": "first_name"}
    )

    assert _names(result) == expected


def test_query_never_returns_another_agency_rows(
    ctx: ToolContext, contacts: dict[str, Any]
) -> None:
    result = call(ctx, "data_query", {"entity_type": "contacts", "filters": {"first_name": "Ada"}})
    everything = call(ctx, "data_query", {"entity_type": "contacts"})

    assert [row["id"] for row in result["rows"]] == [str(contacts["ada"].id)]
    assert str(contacts["other"].id) not in {row["id"] for row in everything["rows"]}
    assert everything["count"] == 3


def test_query_every_entity_type_returns_json_ready_rows_of_the_agency(
    ctx: ToolContext, execution: Execution
) -> None:
    contact = ContactFactory.create(agency=execution.agency)
    NoteFactory.create(contact=contact, content="x" * 2000)
    TaskFactory.create(contact=contact)
    CalendarEventFactory.create(contact=contact)
    EmailMessageFactory.create(contact=contact)
    FormSubmissionFactory.create(agency=execution.agency)
    # One of each in agency B too.
    other = ContactFactory.create()
    NoteFactory.create(contact=other)
    TaskFactory.create(contact=other)
    CalendarEventFactory.create(contact=other)
    EmailMessageFactory.create(contact=other)
    FormSubmissionFactory.create()

    for entity in ENTITIES:
        result = call(ctx, "data_query", {"entity_type": entity})
        json.dumps(result)  # UUIDs and datetimes were turned into strings
        assert result["count"] == 1, entity
        assert set(result["rows"][0]) == set(ENTITIES[entity].fields)
    note = call(ctx, "data_query", {"entity_type": "notes"})["rows"][0]
    assert len(note["content"]) == 300


def test_query_limit_is_capped_at_100_and_ordering_applies(
    ctx: ToolContext, execution: Execution
) -> None:
    contact = ContactFactory.create(agency=execution.agency)
    for n in range(105):
        TaskFactory.create(contact=contact, title=f"t{n:03}")

    result = call(ctx, "data_query", {"entity_type": "tasks", "limit": 500, "order_by": "-title"})

    assert result["count"] == 100
    assert result["has_more"] is True
    assert result["rows"][0]["title"] == "t104"


@pytest.mark.parametrize(
    ("args", "message_part"),
    [
        ({"entity_type": "users"}, "Allowed: contacts, notes, tasks"),
        ({"entity_type": "contacts", "filters": {"agency_id": "x"}}, "Allowed fields: id,"),
        ({"entity_type": "contacts", "filters": {"ip_address": "x"}}, "not allowed"),
        ({"entity_type": "contacts", "filters": {"email": {"regex": ".*"}}}, "allowed: eq, neq"),
        ({"entity_type": "contacts", "filters": {"status": "vip"}}, "must be one of"),
        ({"entity_type": "contacts", "filters": {"id": "nope"}}, "must be a UUID"),
        ({"entity_type": "contacts", "filters": {"created_at": {"gt": 5}}}, "ISO 8601"),
        ({"entity_type": "contacts", "filters": {"custom_fields": {"eq": {}}}}, "not allowed"),
        ({"entity_type": "contacts", "order_by": "custom_fields"}, "order_by"),
        ({"entity_type": "contacts", "order_by": "agency__name"}, "order_by"),
        ({"entity_type": "form_submissions", "filters": {"ip_address": "1.2.3.4"}}, "not allowed"),
    ],
)
def test_query_refuses_what_is_not_allowed_and_says_what_is(
    ctx: ToolContext, args: dict[str, Any], message_part: str
) -> None:
    error = call_error(ctx, "data_query", args)

    assert error.code == "invalid_argument"
    assert message_part in error.message


def _events(execution: Execution, *spans: tuple[float, float, str]) -> None:
    contact = ContactFactory.create(agency=execution.agency)
    for start, minutes, status in spans:
        begin = START + datetime.timedelta(days=start)
        CalendarEventFactory.create(
            contact=contact,
            start_at=begin,
            end_at=begin + datetime.timedelta(minutes=minutes),
            status=status,
        )


def test_aggregate_count_grouped_by_a_field(ctx: ToolContext, contacts: dict[str, Any]) -> None:
    grouped = {"entity_type": "contacts", "metric": "count", "group_by": "status"}
    result = call(ctx, "data_aggregate", grouped)
    total = call(ctx, "data_aggregate", {"entity_type": "contacts", "metric": "count"})

    assert result["groups"] == [{"key": "customer", "value": 1}, {"key": "lead", "value": 2}]
    assert total["value"] == 3  # agency B's contact is not counted


def test_aggregate_avg_sum_min_max_over_numeric_and_date_fields(
    ctx: ToolContext, execution: Execution
) -> None:
    _events(execution, (0, 30, "confirmed"), (1, 60, "confirmed"), (40, 90, "tentative"))
    other = ContactFactory.create()
    CalendarEventFactory.create(
        contact=other, start_at=START, end_at=START + datetime.timedelta(hours=9)
    )

    def agg(metric: str, **extra: Any) -> Any:
        args = {"entity_type": "calendar_events", "metric": metric, **extra}
        return call(ctx, "data_aggregate", args)

    assert agg("avg:duration_minutes")["value"] == 60.0
    assert agg("sum:duration_minutes")["value"] == 180.0
    assert agg("min:start_at")["value"] == START.isoformat()
    assert agg("max:duration_minutes")["value"] == 90.0
    january = agg("count", date_range={"from": "2030-01-01", "to": "2030-02-01"})
    assert january["value"] == 2
    by_month = agg("sum:duration_minutes", group_by="start_at:month")
    assert by_month["groups"] == [
        {"key": "2030-01-01T00:00:00+00:00", "value": 90.0},
        {"key": "2030-02-01T00:00:00+00:00", "value": 90.0},
    ]


@pytest.mark.parametrize(
    ("args", "message_part"),
    [
        ({"entity_type": "contacts", "metric": "median:created_at"}, "Unknown metric"),
        ({"entity_type": "contacts", "metric": "sum:first_name"}, "not allowed"),
        ({"entity_type": "contacts", "metric": "avg"}, "needs a field"),
        ({"entity_type": "contacts", "metric": "count", "group_by": "created_at"}, ":day"),
        ({"entity_type": "contacts", "metric": "count", "group_by": "tags"}, "not allowed"),
        ({"entity_type": "contacts", "metric": "count", "group_by": "created_at:hour"}, "period"),
        ({"entity_type": "contacts", "metric": "count", "date_range": {"since": "x"}}, "keys"),
        ({"entity_type": "secrets", "metric": "count"}, "Allowed:"),
    ],
)
def test_aggregate_refuses_unknown_metrics_fields_and_groupings(
    ctx: ToolContext, args: dict[str, Any], message_part: str
) -> None:
    error = call_error(ctx, "data_aggregate", args)

    assert error.code == "invalid_argument"
    assert message_part in error.message


def test_aggregate_date_range_to_a_date_alone_includes_that_whole_day(
    ctx: ToolContext, execution: Execution
) -> None:
    # Jan 1 09:00, Jan 31 09:00 and Feb 1 09:00 (START is 2030-01-01T09:00Z).
    _events(execution, (0, 30, "confirmed"), (30, 30, "confirmed"), (31, 30, "confirmed"))

    def count(date_range: dict[str, str]) -> Any:
        args = {"entity_type": "calendar_events", "metric": "count", "date_range": date_range}
        return call(ctx, "data_aggregate", args)["value"]

    assert count({"from": "2030-01-01", "to": "2030-01-31"}) == 2
    assert count({"from": "2030-01-31", "to": "2030-01-31"}) == 1
    # A date-time with a time is an exclusive end, as given.
    assert count({"from": "2030-01-01", "to": "2030-01-31T09:00:00Z"}) == 1


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        ("2030-01-31", ["Jan 31"]),  # eq: the whole day, not its midnight
        ({"eq": "2030-01-31"}, ["Jan 31"]),
        ({"neq": "2030-01-31"}, ["Feb 1", "Jan 1", "None"]),  # as neq on a date-time: nulls too
        ({"lte": "2030-01-31"}, ["Jan 1", "Jan 31"]),
        ({"gt": "2030-01-31"}, ["Feb 1"]),
        ({"gte": "2030-01-31"}, ["Feb 1", "Jan 31"]),
        ({"lt": "2030-01-31"}, ["Jan 1"]),
        ({"eq": "2030-01-31T09:00:00Z"}, ["Jan 31"]),
        ({"eq": "2030-01-31T09:00:01Z"}, []),
        ({"neq": "2030-01-31T09:00:00Z"}, ["Feb 1", "Jan 1", "None"]),
    ],
)
def test_query_a_date_alone_on_a_date_time_field_means_the_whole_day(
    ctx: ToolContext, execution: Execution, condition: Any, expected: list[str]
) -> None:
    contact = ContactFactory.create(agency=execution.agency)
    for days, title in [(0, "Jan 1"), (30, "Jan 31"), (31, "Feb 1")]:
        TaskFactory.create(
            contact=contact, title=title, due_at=START + datetime.timedelta(days=days)
        )
    TaskFactory.create(contact=contact, title="None", due_at=None)

    result = call(
        ctx,
        "data_query",
        {"entity_type": "tasks", "filters": {"due_at": condition}, "order_by": "title"},
    )

    assert [row["title"] for row in result["rows"]] == expected


@pytest.mark.parametrize(
    ("filters", "message_part"),
    [
        ({"first_name": "A\x00B"}, "NUL"),
        ({"first_name": {"icontains": "A\x00"}}, "NUL"),
        ({"first_name": {"in": ["Ada", "A\x00B"]}}, "NUL"),
        ({"tags": {"contains": ["v\x00ip"]}}, "NUL"),
        ({"owner_id": 10**400}, "whole number"),
        ({"owner_id": 2**63}, "whole number"),
        ({"owner_id": {"gt": 1.5}}, "whole number"),
        ({"owner_id": {"in": [1, 2.5]}}, "whole number"),
        ({"created_at": {"gte": "9999-12-31T22:00:00-05:00"}}, "between 1900"),
        ({"created_at": "0001-01-01"}, "between 1900"),
    ],
)
def test_query_refuses_values_postgresql_cannot_take(
    ctx: ToolContext, filters: dict[str, Any], message_part: str
) -> None:
    error = call_error(ctx, "data_query", {"entity_type": "contacts", "filters": filters})

    assert error.code == "invalid_argument"
    assert message_part in error.message


@pytest.mark.parametrize("value", [pytest.param(10**400, id="10**400"), float("inf"), float("nan")])
def test_query_refuses_a_non_finite_number_for_a_numeric_field(
    ctx: ToolContext, value: Any
) -> None:
    args = {"entity_type": "calendar_events", "filters": {"duration_minutes": {"gt": value}}}

    error = call_error(ctx, "data_query", args, validate=False)

    assert error.code == "invalid_argument"
    assert "finite number" in error.message


def test_query_takes_whole_number_floats_for_integer_fields_and_limit(
    ctx: ToolContext, execution: Execution
) -> None:
    contact = ContactFactory.create(agency=execution.agency)
    for n in range(3):
        TaskFactory.create(contact=contact, title=f"t{n}")
    _events(execution, (0, 30, "confirmed"), (1, 90, "confirmed"))

    limited = call(ctx, "data_query", {"entity_type": "tasks", "limit": 2.0})
    unassigned = call(
        ctx, "data_query", {"entity_type": "tasks", "filters": {"assignee_id": {"neq": 1.0}}}
    )
    long_events = call(
        ctx,
        "data_query",
        {"entity_type": "calendar_events", "filters": {"duration_minutes": {"gt": 45.5}}},
    )
    half = call_error(ctx, "data_query", {"entity_type": "tasks", "limit": 2.5}, validate=False)

    assert (limited["count"], limited["has_more"]) == (2, True)
    assert unassigned["count"] == 3
    assert [row["duration_minutes"] for row in long_events["rows"]] == [90.0]
    assert half.code == "invalid_argument"
