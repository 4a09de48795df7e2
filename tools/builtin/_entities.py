"""What ``data_query`` and ``data_aggregate`` may touch: entity types, fields, operators.

The model describes a query as data; only names listed here ever reach the ORM, so it cannot
name a column, relation or lookup that is not allowed, let alone write SQL. Filter values are
checked and converted in Python first, because a value PostgreSQL rejects would abort the
executor's transaction.
"""

from __future__ import annotations

import datetime
import math
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db import models
from django.db.models import Q
from django.db.models.functions import Extract

from crm import models as crm
from tools.builtin import _args
from tools.builtin._args import INVALID
from tools.handlers import ToolError

TEXT, UUID, CHOICE, DATETIME, NUMBER = "text", "uuid", "choice", "datetime", "number"
ARRAY, JSON = "array", "json"
OPERATORS: dict[str, tuple[str, ...]] = {
    TEXT: ("eq", "neq", "contains", "icontains", "in", "isnull"),
    UUID: ("eq", "neq", "in", "isnull"),
    CHOICE: ("eq", "neq", "in", "isnull"),
    DATETIME: ("eq", "neq", "gt", "gte", "lt", "lte", "isnull"),
    NUMBER: ("eq", "neq", "gt", "gte", "lt", "lte", "in", "isnull"),
    ARRAY: ("contains",),
    JSON: (),  # returned, never filtered on
}
ALL_OPERATORS = ("eq", "neq", "gt", "gte", "lt", "lte", "contains", "icontains", "in", "isnull")
_LOOKUP = {"eq": "exact", "neq": "exact", "contains": "contains", "icontains": "icontains"}
MAX_FILTERS = 20
MAX_IN_VALUES = 100
BIGINT = 2**63  # integer columns (user ids) are bigint: a larger operand cannot match anything


@dataclass(frozen=True)
class Field:
    kind: str
    choices: tuple[str, ...] = ()
    expression: Any = None  # a computed field (annotation) instead of a column
    integer: bool = False  # a NUMBER stored as an integer: operands must be whole numbers


@dataclass(frozen=True)
class Entity:
    model: type[models.Model]
    fields: dict[str, Field]
    date_field: str  # what data_aggregate's date_range applies to unless told otherwise

    def queryset(self, agency_id: uuid.UUID) -> models.QuerySet[Any]:
        queryset = self.model._default_manager.filter(agency_id=agency_id)
        computed = {name: f.expression for name, f in self.fields.items() if f.expression}
        return queryset.annotate(**computed) if computed else queryset


def _common(**extra: Field) -> dict[str, Field]:
    return {
        "id": Field(UUID),
        **extra,
        "created_at": Field(DATETIME),
        "updated_at": Field(DATETIME),
    }


def _choice(choices: type[models.TextChoices]) -> Field:
    return Field(CHOICE, tuple(choices.values))


USER_ID = Field(NUMBER, integer=True)


_DURATION_MINUTES = Extract(
    models.F("end_at") - models.F("start_at"), "epoch", output_field=models.FloatField()
) / models.Value(60.0)

ENTITIES: dict[str, Entity] = {
    "contacts": Entity(
        crm.Contact,
        _common(
            **{name: Field(TEXT) for name in ("first_name", "last_name", "email", "phone")},
            company=Field(TEXT),
            job_title=Field(TEXT),
            status=_choice(crm.ContactStatus),
            source=_choice(crm.ContactSource),
            tags=Field(ARRAY),
            custom_fields=Field(JSON),
            site_id=Field(UUID),
            owner_id=USER_ID,
            agent_id=Field(UUID),
            last_contacted_at=Field(DATETIME),
        ),
        date_field="created_at",
    ),
    "notes": Entity(
        crm.Note,
        _common(
            contact_id=Field(UUID),
            kind=_choice(crm.NoteKind),
            content=Field(TEXT),
            author_id=USER_ID,
            agent_id=Field(UUID),
        ),
        date_field="created_at",
    ),
    "tasks": Entity(
        crm.Task,
        _common(
            title=Field(TEXT),
            description=Field(TEXT),
            due_at=Field(DATETIME),
            priority=_choice(crm.TaskPriority),
            status=_choice(crm.TaskStatus),
            assignee_id=USER_ID,
            contact_id=Field(UUID),
            agent_id=Field(UUID),
            completed_at=Field(DATETIME),
        ),
        date_field="created_at",
    ),
    "calendar_events": Entity(
        crm.CalendarEvent,
        _common(
            title=Field(TEXT),
            description=Field(TEXT),
            location=Field(TEXT),
            start_at=Field(DATETIME),
            end_at=Field(DATETIME),
            duration_minutes=Field(NUMBER, expression=_DURATION_MINUTES),
            attendees=Field(ARRAY),
            organizer_id=USER_ID,
            contact_id=Field(UUID),
            status=_choice(crm.EventStatus),
            agent_id=Field(UUID),
        ),
        date_field="start_at",
    ),
    "emails": Entity(
        crm.EmailMessage,
        _common(
            from_email=Field(TEXT),
            to=Field(ARRAY),
            cc=Field(ARRAY),
            subject=Field(TEXT),
            body=Field(TEXT),
            template_id=Field(TEXT),
            status=_choice(crm.EmailStatus),
            sent_at=Field(DATETIME),
            error=Field(TEXT),
            contact_id=Field(UUID),
            agent_id=Field(UUID),
            execution_id=Field(UUID),
        ),
        date_field="created_at",
    ),
    # No ip_address / user_agent: visitors' network details are not for the model.
    "form_submissions": Entity(
        crm.FormSubmission,
        _common(
            form_name=Field(TEXT),
            data=Field(JSON),
            contact_id=Field(UUID),
            page_url=Field(TEXT),
            site_id=Field(UUID),
            submitted_at=Field(DATETIME),
        ),
        date_field="submitted_at",
    ),
}


def entity_for(name: object) -> Entity:
    if not isinstance(name, str) or name not in ENTITIES:
        raise ToolError(
            INVALID,
            f"Unknown entity_type {str(name)[:60]!r}. Allowed: {', '.join(ENTITIES)}.",
            allowed=list(ENTITIES),
        )
    return ENTITIES[name]


def field_for(entity: Entity, name: object, purpose: str, kinds: tuple[str, ...] = ()) -> Field:
    """The allowed field ``name`` of ``entity``, of one of ``kinds`` if given."""
    allowed = [n for n, f in entity.fields.items() if not kinds or f.kind in kinds]
    if not isinstance(name, str) or name not in allowed:
        raise ToolError(
            INVALID,
            f"{purpose}: {str(name)[:60]!r} is not allowed. Allowed fields: {', '.join(allowed)}.",
            allowed=allowed,
        )
    return entity.fields[name]


def _value(spec: Field, name: str, op: str, value: Any) -> Any:
    """Check and convert one filter operand for the ORM."""
    if op == "isnull":
        if not isinstance(value, bool):
            raise ToolError(INVALID, f"Filter {name}.isnull needs true or false.")
        return value
    if op == "in":
        if not isinstance(value, list) or not 1 <= len(value) <= MAX_IN_VALUES:
            raise ToolError(INVALID, f"Filter {name}.in needs a list of 1-{MAX_IN_VALUES} values.")
        return [_scalar(spec, name, "eq", item) for item in value]
    return _scalar(spec, name, op, value)


def _scalar(spec: Field, name: str, op: str, value: Any) -> Any:
    checked: Any
    if spec.kind == ARRAY:
        checked = value if isinstance(value, list) else [value]
        if not checked or not all(isinstance(item, str) for item in checked):
            raise ToolError(INVALID, f"Filter {name}.contains needs a string or list of strings.")
        _refuse_nul(name, op, *checked)
    elif spec.kind == UUID:
        checked = _args.parse_uuid(value, name)
    elif spec.kind == DATETIME:
        checked = _args.parse_datetime(value, name, date_only_ok=True)
    elif spec.kind == NUMBER:
        checked = _number(spec, name, op, value)
    elif spec.kind == CHOICE:
        checked = _args.choice(value, name, list(spec.choices))
    elif not isinstance(value, str) or len(value) > 1000:
        raise ToolError(INVALID, f"Filter {name}.{op} needs a string (at most 1000 characters).")
    else:
        _refuse_nul(name, op, value)
        checked = value
    return checked


def _refuse_nul(name: str, op: str, *values: str) -> None:
    if any("\x00" in value for value in values):  # PostgreSQL text cannot hold NUL
        raise ToolError(INVALID, f"Filter {name}.{op} must not contain NUL characters.")


def _number(spec: Field, name: str, op: str, value: Any) -> int | float:
    """A whole number in the bigint range for integer fields, else a finite float.

    Refused rather than passed on: 1.5 would be truncated to 1 for an integer column, and a
    value no column type can hold (10**400, NaN, infinity) fails in the driver or the database.
    """
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise ToolError(INVALID, f"Filter {name}.{op} needs a number.")
    if spec.integer:
        whole = _args.whole_number(value)
        if whole is None or not -BIGINT <= whole < BIGINT:
            raise ToolError(INVALID, f"Filter {name}.{op} needs a whole number (a user id).")
        return whole
    try:
        number = float(value)
    except OverflowError:  # an int too large for a float
        number = math.inf
    if not math.isfinite(number):
        raise ToolError(INVALID, f"Filter {name}.{op} needs a finite number.")
    return number


def compile_filters(entity: Entity, filters: object) -> Q:
    """``{"status": "lead", "created_at": {"gte": "2030-01-01"}, "email": null}`` as a Q."""
    if filters is None:
        return Q()
    if not isinstance(filters, Mapping):
        raise ToolError(
            INVALID, "'filters' must be an object of field: value or field: {op: value}."
        )
    if len(filters) > MAX_FILTERS:
        raise ToolError(INVALID, f"At most {MAX_FILTERS} filtered fields.")
    q = Q()
    for name, condition in filters.items():
        spec = field_for(
            entity, name, "Filter field", kinds=tuple(k for k in OPERATORS if OPERATORS[k])
        )
        if condition is None:
            clauses = {"isnull": True}
        elif isinstance(condition, Mapping):
            clauses = dict(condition)
        else:
            clauses = {"eq": condition}
        for op, operand in clauses.items():
            if op not in OPERATORS[spec.kind]:
                allowed = ", ".join(OPERATORS[spec.kind])
                raise ToolError(
                    INVALID,
                    f"Operator {str(op)[:30]!r} is not allowed on {name} ({spec.kind}); "
                    f"allowed: {allowed}. Operators overall: {', '.join(ALL_OPERATORS)}.",
                )
            if spec.kind == DATETIME and op != "isnull":
                q &= _datetime_clause(name, op, operand)
                continue
            lookup = {f"{name}__{_LOOKUP.get(op, op)}": _value(spec, name, op, operand)}
            q &= ~Q(**lookup) if op == "neq" else Q(**lookup)
    return q


def _datetime_clause(name: str, op: str, operand: Any) -> Q:
    """One comparison with a date-time field; a date alone names that whole day (UTC).

    ``{"due_at": "2030-01-31"}`` means due that day, not at its midnight: eq/neq are the day's
    range, lte runs to the day's end and gt starts after it (gte and lt start at its midnight
    anyway). A date-time with a time compares as given.
    """
    moment, whole_day = _args.parse_moment(operand, name, date_only_ok=True)
    if not whole_day or op in ("gte", "lt"):
        clause = Q(**{f"{name}__{_LOOKUP.get(op, op)}": moment})
        return ~clause if op == "neq" else clause
    next_day = moment + datetime.timedelta(days=1)
    day = Q(**{f"{name}__gte": moment, f"{name}__lt": next_day})
    clauses = {
        "eq": day,
        "neq": ~day,
        "lte": Q(**{f"{name}__lt": next_day}),
        "gt": Q(**{f"{name}__gte": next_day}),
    }
    return clauses[op]


def date_bounds(value: object) -> tuple[datetime.datetime | None, datetime.datetime | None, str]:
    """``{"from": iso, "to": iso, "field": name}`` -> (from, to, field or "") as [from, to).

    A date alone as ``to`` includes that day: "to": "2030-01-31" ends at 2030-02-01T00:00Z
    (exclusive), as a person asking for January 1-31 means. A date alone as ``from`` starts at
    its midnight UTC; a date-time with a time is used as given.
    """
    if not isinstance(value, Mapping):
        raise ToolError(INVALID, '\'date_range\' must be an object like {"from": ..., "to": ...}.')
    unknown = set(value) - {"from", "to", "start", "end", "field"}
    if unknown:
        raise ToolError(INVALID, f"'date_range' keys: from, to, field; not {sorted(unknown)}.")
    low, high = value.get("from", value.get("start")), value.get("to", value.get("end"))
    start = _args.parse_datetime(low, "date_range.from", date_only_ok=True) if low else None
    end = None
    if high:
        end, whole_day = _args.parse_moment(high, "date_range.to", date_only_ok=True)
        if whole_day:
            end += datetime.timedelta(days=1)
    return start, end, str(value.get("field") or "")
