"""describe_action: a tool call in words a person can judge, for the inbox and the e-mails."""

from __future__ import annotations

import pytest

from approvals.describe import MAX_CHARS, describe_action

UUID = "5f1c2d3e-1111-2222-3333-444455556666"


def test_an_email_to_many_recipients_counts_them() -> None:
    to = [f"lead{i}@example.com" for i in range(14)]
    sentence = describe_action("email_send", {"to": to, "subject": "Q3 offer", "body": "Hi"})
    assert sentence == "Send email 'Q3 offer' to 14 recipients"


def test_an_email_to_one_recipient_names_them() -> None:
    sentence = describe_action("email_send", {"to": ["ann@example.com"], "subject": "Q3 offer"})
    assert sentence == "Send email 'Q3 offer' to ann@example.com"
    # A model that sends one address as a string is understood as well.
    assert describe_action("email_send", {"to": "ann@example.com", "subject": "Q3 offer"}) == (
        "Send email 'Q3 offer' to ann@example.com"
    )


def test_an_email_to_two_recipients_names_both() -> None:
    sentence = describe_action("email_send", {"to": ["a@example.com", "b@example.com"]})
    assert sentence == "Send an email to a@example.com and b@example.com"


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"),
    [
        ("email_draft", {"to": ["a@x.io"], "subject": "Hello"}, "Draft email 'Hello' to a@x.io"),
        (
            "crm_update_contact",
            {"contact_id": UUID, "updates": {"status": "customer", "company": "Acme"}},
            "Update contact 5f1c2d3e: set status to 'customer', company to 'Acme'",
        ),
        ("crm_delete_contact", {"contact_id": UUID}, "Delete CRM contact 5f1c2d3e"),
        ("crm_delete_contact", {"contact_ids": ["1", "2", "3"]}, "Delete 3 CRM contacts"),
        (
            "crm_create_contact",
            {"email": "ann@example.com", "first_name": "Ann", "last_name": "Lee"},
            "Create contact ann@example.com (Ann Lee)",
        ),
        (
            "crm_add_note",
            {"contact_id": UUID, "content": "Called, no answer", "type": "call"},
            "Add a call note to contact 5f1c2d3e: 'Called, no answer'",
        ),
        (
            "task_create",
            {"title": "Call back", "priority": "high", "due_date": "2026-12-01"},
            "Create task 'Call back' (high priority, due 2026-12-01)",
        ),
        (
            "notify_user",
            {"message": "Budget almost spent", "channel": "email", "user_id": "7"},
            "Notify user 7 by email: 'Budget almost spent'",
        ),
        ("notify_user", {"message": "Done"}, "Notify the agency's team: 'Done'"),
        (
            "trigger_workflow",
            {"workflow_id": "onboarding", "input_data": {"contact": "x", "step": 2}},
            "Start workflow 'onboarding' with contact='x', step=2",
        ),
        (
            "calendar_create_event",
            {"title": "Demo", "start_time": "2026-12-01T10:00", "attendees": ["a@x.io"]},
            "Schedule 'Demo' at 2026-12-01T10:00 with a@x.io",
        ),
        ("data_export", {"entity_type": "contacts"}, "Export contacts"),
        ("web_scrape", {"url": "https://example.com/a"}, "Read the web page https://example.com/a"),
        ("wait", {"seconds": 30}, "Wait 30 seconds"),
    ],
)
def test_default_tools_read_as_sentences(tool: str, arguments: dict, expected: str) -> None:
    assert describe_action(tool, arguments) == expected


def test_other_tools_get_a_generic_sentence_with_a_few_arguments() -> None:
    sentence = describe_action(
        "custom_lookup",
        {"subject": "Renewal", "to": ["a@x.io"], "limit": 3, "extra": {"a": 1}},
        display_name="Look up renewals",
    )
    assert (
        sentence
        == "Run Look up renewals with subject='Renewal', to=['a@x.io'], limit=3, and 1 more"
    )
    assert describe_action("custom_lookup_v2", {}) == "Run Custom lookup v2"


def test_long_and_multiline_values_are_cut_to_one_short_line() -> None:
    subject = "A very long subject line " * 20
    sentence = describe_action("email_send", {"subject": subject + "\nsecond line", "to": []})
    assert sentence.startswith("Send email 'A very long subject line A very")
    assert "\n" not in sentence
    assert "…'" in sentence
    assert len(sentence) < 90
    huge = describe_action("custom", {f"k{i}": "v" * 500 for i in range(50)})
    assert len(huge) <= MAX_CHARS


def test_arguments_of_an_unexpected_shape_never_raise() -> None:
    assert describe_action("email_send", None) == "Send an email"
    assert describe_action("email_send", {"to": 5, "subject": ["x"]}) == "Send an email"
    assert describe_action("crm_update_contact", {"updates": "all"}) == "Update a contact"
    assert describe_action("wait", {"seconds": "soon"}) == "Wait"
