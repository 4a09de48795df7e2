"""Which tool results look wrong enough to investigate (memory.learning.investigations): nothing
returned, all lists empty, or an error saying the thing is not there; not a result with data, nor
an error the model should correct itself (bad arguments)."""

from __future__ import annotations

from typing import Any

import pytest

from memory.learning.investigations import looks_wrong


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ({}, "empty_result"),
        ({"contacts": [], "count": 0, "has_more": False}, "empty_result"),
        ({"result": None}, "empty_result"),
        ({"error": {"code": "not_found", "message": "No contact with that e-mail."}}, "error"),
        ({"error": {"code": "invalid_arguments", "message": "Give a contact_id."}}, None),
        ({"contacts": [{"id": 1}], "count": 1}, None),
        ({"sent": True, "message_id": "m-1"}, None),
        ({"results": [], "related": [{"id": 2}]}, None),
    ],
)
def test_what_looks_wrong(output: dict[str, Any], expected: str | None) -> None:
    assert looks_wrong(output) == expected
