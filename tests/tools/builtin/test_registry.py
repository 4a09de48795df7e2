"""Every seeded system tool has a built-in handler, and no handler lacks a seeded tool."""

from __future__ import annotations

import pytest

from core import tenancy
from tools.models import Tool
from tools.registry import get_handler, registered_names


@pytest.mark.django_db
def test_registered_handlers_are_exactly_the_seeded_system_tools() -> None:
    with tenancy.platform_context():
        seeded = set(Tool.objects.filter(is_system=True).values_list("name", flat=True))

    # seed 004's 17, ask_user (seed 000's clarifications), remember and recall (issue 17),
    # delegate_to_agent (issue 19), list_datasets, get_dataset_schema, execute_sql,
    # execute_query_plan and execute_python (issue 30)
    assert len(seeded) == 26
    assert set(registered_names()) == seeded
    assert all(callable(get_handler(name)) for name in seeded)
