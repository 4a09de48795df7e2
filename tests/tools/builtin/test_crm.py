"""CRM tools on real contacts: lookups, search, create (duplicates), updates, notes, tasks."""

from __future__ import annotations

import pytest

from agents.models import Execution
from core import tenancy
from core.models import ActorType, Event
from crm.models import Contact, ContactSource, Note, Task
from tests.crm.factories import ContactFactory, NoteFactory
from tests.factories import MembershipFactory
from tests.tools.builtin.conftest import call, call_error
from tools.handlers import ToolContext


def _events(ctx: ToolContext, event_type: str) -> list[Event]:
    with tenancy.agency_context(ctx.agency_id):
        return list(Event.objects.filter(agency_id=ctx.agency_id, event_type=event_type))


def test_get_contact_by_id_and_by_email_case_insensitively(
    ctx: ToolContext, execution: Execution
) -> None:
    contact = ContactFactory.create(agency=execution.agency, email="Ada@Example.com")
    NoteFactory.create(contact=contact, content="Prefers e-mail.")

    by_id = call(ctx, "crm_get_contact", {"contact_id": str(contact.id)})["contact"]
    by_email = call(ctx, "crm_get_contact", {"email": "ada@example.COM"})["contact"]

    assert by_id["id"] == by_email["id"] == str(contact.id)
    assert by_id["email"] == "Ada@Example.com"
    assert by_id["recent_notes"] == [{"kind": "note", "content": "Prefers e-mail."}]


def test_get_contact_not_found_and_other_agency_contact_is_not_found(ctx: ToolContext) -> None:
    other_agency_contact = ContactFactory.create(email="b-only@example.com")

    missing = call_error(ctx, "crm_get_contact", {"email": "nobody@example.com"})
    by_id = call_error(ctx, "crm_get_contact", {"contact_id": str(other_agency_contact.id)})
    by_email = call_error(ctx, "crm_get_contact", {"email": "b-only@example.com"})

    assert missing.code == by_id.code == by_email.code == "not_found"


def test_get_contact_rejects_a_malformed_id(ctx: ToolContext) -> None:
    assert (
        call_error(ctx, "crm_get_contact", {"contact_id": "not-a-uuid"}).code == "invalid_argument"
    )


def test_search_matches_words_over_fields_with_filters_and_stays_in_the_agency(
    ctx: ToolContext, execution: Execution
) -> None:
    agency = execution.agency
    ada = ContactFactory.create(
        agency=agency, first_name="Ada", company="Analytical Engines", tags=["vip", "uk"]
    )
    ContactFactory.create(agency=agency, first_name="Ada", company="Other", status="customer")
    ContactFactory.create(first_name="Ada", company="Analytical Engines")  # agency B

    found = call(ctx, "crm_search_contacts", {"query": "ada analytical"})
    tagged = call(ctx, "crm_search_contacts", {"query": "ada", "tags": ["vip"]})
    customers = call(ctx, "crm_search_contacts", {"query": "ada", "status": "customer"})

    assert [c["id"] for c in found["contacts"]] == [str(ada.id)]
    assert [c["id"] for c in tagged["contacts"]] == [str(ada.id)]
    assert [c["company"] for c in customers["contacts"]] == ["Other"]
    assert set(found["contacts"][0]) == {
        "id",
        "name",
        "email",
        "company",
        "phone",
        "status",
        "tags",
    }


def test_search_limit_is_capped_at_50(ctx: ToolContext, execution: Execution) -> None:
    for _ in range(52):
        ContactFactory.create(agency=execution.agency, company="Bulk Co")

    result = call(ctx, "crm_search_contacts", {"query": "bulk", "limit": 100})

    assert result["count"] == 50
    assert result["has_more"] is True


def test_create_contact_records_the_agent_and_emits_an_agent_event(ctx: ToolContext) -> None:
    result = call(
        ctx,
        "crm_create_contact",
        {"email": "new@example.com", "first_name": "Grace", "tags": ["lead"], "company": "Navy"},
    )

    with tenancy.agency_context(ctx.agency_id):
        contact = Contact.objects.get(id=result["contact"]["id"])
    assert (contact.first_name, contact.company, contact.tags) == ("Grace", "Navy", ["lead"])
    assert contact.source == ContactSource.AI_AGENT
    assert contact.agent_id == ctx.agent_id
    assert contact.site_id == ctx.site_id
    [event] = _events(ctx, "crm.contact.created")
    assert event.payload["contact_id"] == str(contact.id)
    assert (event.actor_type, event.actor_id) == (ActorType.AGENT, str(ctx.agent_id))


def test_create_contact_refuses_a_duplicate_email_case_insensitively(
    ctx: ToolContext, execution: Execution
) -> None:
    existing = ContactFactory.create(agency=execution.agency, email="Dup@Example.com")

    error = call_error(ctx, "crm_create_contact", {"email": "dup@example.com"})

    assert error.code == "duplicate"
    assert error.details == {"existing_id": str(existing.id)}
    assert _events(ctx, "crm.contact.created") == []


def test_same_email_in_another_agency_is_not_a_duplicate(ctx: ToolContext) -> None:
    ContactFactory.create(email="shared@example.com")  # agency B

    result = call(ctx, "crm_create_contact", {"email": "shared@example.com"})

    assert result["created"] is True


def test_update_contact_changes_allowed_fields_merges_custom_fields_and_emits(
    ctx: ToolContext, execution: Execution
) -> None:
    contact = ContactFactory.create(
        agency=execution.agency, custom_fields={"plan": "basic", "seats": 3}
    )

    result = call(
        ctx,
        "crm_update_contact",
        {
            "contact_id": str(contact.id),
            "updates": {"status": "customer", "custom_fields": {"plan": "pro", "seats": None}},
        },
    )

    assert result["changed_fields"] == ["status", "custom_fields"]
    with tenancy.agency_context(ctx.agency_id):
        contact.refresh_from_db()
    assert contact.status == "customer"
    assert contact.custom_fields == {"plan": "pro"}
    [event] = _events(ctx, "crm.contact.updated")
    assert event.payload["changed_fields"] == ["status", "custom_fields"]


@pytest.mark.parametrize(
    ("updates", "code"),
    [
        ({"owner_id": 1}, "invalid_argument"),
        ({"agency_id": "x"}, "invalid_argument"),
        ({"status": "vip"}, "invalid_argument"),
        ({"email": "taken@example.com"}, "duplicate"),
    ],
)
def test_update_contact_refuses_fields_outside_the_allow_list_and_bad_values(
    ctx: ToolContext, execution: Execution, updates: dict[str, object], code: str
) -> None:
    contact = ContactFactory.create(agency=execution.agency, status="lead")
    ContactFactory.create(agency=execution.agency, email="taken@example.com")

    error = call_error(
        ctx, "crm_update_contact", {"contact_id": str(contact.id), "updates": updates}
    )

    assert error.code == code
    with tenancy.agency_context(ctx.agency_id):
        contact.refresh_from_db()
    assert contact.status == "lead"


def test_update_contact_of_another_agency_is_not_found(ctx: ToolContext) -> None:
    other = ContactFactory.create()

    error = call_error(
        ctx, "crm_update_contact", {"contact_id": str(other.id), "updates": {"company": "Mine"}}
    )

    assert error.code == "not_found"


def test_add_note_creates_it_for_the_contact_and_emits(
    ctx: ToolContext, execution: Execution
) -> None:
    contact = ContactFactory.create(agency=execution.agency)

    result = call(
        ctx,
        "crm_add_note",
        {"contact_id": str(contact.id), "content": "Asked for a quote.", "type": "call"},
    )

    with tenancy.agency_context(ctx.agency_id):
        note = Note.objects.get(id=result["note"]["id"])
    assert (note.contact_id, note.kind, note.agent_id) == (contact.id, "call", ctx.agent_id)
    [event] = _events(ctx, "crm.note.created")
    assert event.payload["note_id"] == str(note.id)


def test_add_note_to_another_agency_contact_is_not_found(ctx: ToolContext) -> None:
    other = ContactFactory.create()

    error = call_error(ctx, "crm_add_note", {"contact_id": str(other.id), "content": "Hi"})

    assert error.code == "not_found"
    with tenancy.platform_context():
        assert not Note.objects.filter(contact_id=other.id).exists()


def test_task_create_assigns_a_member_of_the_agency(ctx: ToolContext, execution: Execution) -> None:
    member = MembershipFactory.create(agency=execution.agency)

    result = call(
        ctx,
        "task_create",
        {
            "title": "Call back",
            "priority": "high",
            "due_date": "2030-05-01T09:00:00+02:00",
            "assigned_to": member.user.email,
        },
    )

    with tenancy.agency_context(ctx.agency_id):
        task = Task.objects.get(id=result["task"]["id"])
    assert (task.title, task.priority, task.assignee_id) == ("Call back", "high", member.user_id)
    assert task.due_at is not None
    assert task.due_at.isoformat() == "2030-05-01T07:00:00+00:00"
    assert len(_events(ctx, "crm.task.created")) == 1


def test_task_create_refuses_a_user_of_another_agency(ctx: ToolContext) -> None:
    outsider = MembershipFactory.create()  # a member of agency B

    error = call_error(ctx, "task_create", {"title": "x", "assigned_to": str(outsider.user_id)})

    assert error.code == "not_found"


@pytest.mark.parametrize(
    ("due_date", "validate"),
    [
        ("9999-12-31T22:00:00-05:00", True),  # year 10000 in UTC
        ("0001-01-01T00:00:00+05:00", True),  # before year 1 in UTC
        ("1899-12-31", False),  # a date alone is checked too (the schema wants a date-time)
        ("2201-01-01", False),
    ],
)
def test_task_create_refuses_a_due_date_outside_1900_to_2200(
    ctx: ToolContext, due_date: str, validate: bool
) -> None:
    error = call_error(
        ctx, "task_create", {"title": "Someday", "due_date": due_date}, validate=validate
    )

    assert error.code == "invalid_argument"
    assert "between 1900-01-01T00:00:00Z and 2200-12-31T23:59:59Z" in error.message
    with tenancy.agency_context(ctx.agency_id):
        assert not Task.objects.exists()


def test_task_create_refuses_a_deactivated_member(ctx: ToolContext, execution: Execution) -> None:
    member = MembershipFactory.create(agency=execution.agency, user__is_active=False)

    by_email = call_error(ctx, "task_create", {"title": "x", "assigned_to": member.user.email})
    by_id = call_error(ctx, "task_create", {"title": "x", "assigned_to": str(member.user_id)})

    assert by_email.code == by_id.code == "not_found"
    assert "No active member" in by_email.message
    with tenancy.agency_context(ctx.agency_id):
        assert not Task.objects.exists()


KELVIN = "\u212aelvin@example.com"  # KELVIN SIGN: lower() is "k", upper() is itself


def test_create_contact_duplicate_check_compares_as_the_unique_constraint_does(
    ctx: ToolContext, execution: Execution
) -> None:
    existing = ContactFactory.create(agency=execution.agency, email="kelvin@example.com")

    error = call_error(ctx, "crm_create_contact", {"email": KELVIN})

    assert error.code == "duplicate"
    assert error.details == {"existing_id": str(existing.id)}
    assert _events(ctx, "crm.contact.created") == []


def test_update_contact_to_an_email_taken_under_the_constraint_is_a_duplicate(
    ctx: ToolContext, execution: Execution
) -> None:
    existing = ContactFactory.create(agency=execution.agency, email="kelvin@example.com")
    contact = ContactFactory.create(agency=execution.agency, email="other@example.com")

    error = call_error(
        ctx,
        "crm_update_contact",
        {"contact_id": str(contact.id), "updates": {"email": KELVIN}},
    )

    assert error.code == "duplicate"
    assert error.details == {"existing_id": str(existing.id)}


def test_contact_tools_refuse_nul_characters_in_text(ctx: ToolContext) -> None:
    create = call_error(
        ctx, "crm_create_contact", {"email": "a@example.com", "first_name": "A\x00B"}
    )
    search = call_error(ctx, "crm_search_contacts", {"query": "A\x00B"})
    tags = call_error(ctx, "crm_search_contacts", {"query": "a", "tags": ["v\x00ip"]})

    assert create.code == search.code == tags.code == "invalid_argument"
    assert "NUL" in create.message
    assert "NUL" in search.message
    assert "NUL" in tags.message


def test_search_accepts_a_whole_number_float_limit(ctx: ToolContext, execution: Execution) -> None:
    for _ in range(3):
        ContactFactory.create(agency=execution.agency, company="Float Co")

    result = call(ctx, "crm_search_contacts", {"query": "float", "limit": 2.0})
    error = call_error(ctx, "crm_search_contacts", {"query": "float", "limit": 2.5}, validate=False)

    assert (result["count"], result["has_more"]) == (2, True)
    assert error.code == "invalid_argument"
