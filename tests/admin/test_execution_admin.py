"""The executions list says what a waiting run waits for."""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable

import pytest
from django.test import Client
from django.utils import timezone

from agents.models import ExecutionStatus, StepType
from core.models import Agency, User
from tests.admin.helpers import admin_url
from tests.agents.factories import AgentFactory, ExecutionFactory, ExecutionStepFactory

pytestmark = pytest.mark.django_db


def test_the_list_tells_a_rate_limit_wait_and_a_timer_from_a_question(
    agency: Agency, staff: User, login: Callable[[User], Client]
) -> None:
    agent = AgentFactory.create(agency=agency)
    until = timezone.now() + datetime.timedelta(seconds=40)
    ExecutionFactory.create(
        agent=agent, status=ExecutionStatus.WAITING_INPUT, wait_until=until,
        input_request={"kind": "provider_rate_limit", "limit": "requests_per_minute",
                       "value": 60, "until": until.isoformat()},
    )  # fmt: skip
    ExecutionFactory.create(
        agent=agent, status=ExecutionStatus.WAITING_INPUT, wait_until=until,
        input_request={"kind": "timer", "until": until.isoformat()},
    )  # fmt: skip
    ExecutionFactory.create(agent=agent, status=ExecutionStatus.WAITING_APPROVAL)
    ExecutionFactory.create(  # a question for a person: no timer, the status says it all
        agent=agent, status=ExecutionStatus.WAITING_INPUT,
        input_request={"question": "Which plan?"},
    )  # fmt: skip

    page = login(staff).get(admin_url(ExecutionFactory._meta.model, "changelist"))
    assert page.status_code == 200
    cells = sorted(re.findall(r'class="field-status_shown[^"]*">([^<]*)<', page.content.decode()))
    assert len(cells) == 4
    assert cells[0] == "Waiting for approval"
    assert cells[1] == "Waiting for input"  # the question: nothing added
    assert cells[2].startswith("Waiting for input: provider rate limit (requests per minute) until")
    assert cells[3].startswith("Waiting for input: timer until")


def test_the_list_flags_a_completed_run_whose_tool_calls_failed(
    agency: Agency, staff: User, login: Callable[[User], Client]
) -> None:
    agent = AgentFactory.create(agency=agency)
    failing = ExecutionFactory.create(agent=agent, status=ExecutionStatus.COMPLETED)
    ExecutionFactory.create(agent=agent, status=ExecutionStatus.COMPLETED)
    for number, output in enumerate(
        [{"error": {"code": "not_found", "message": "no such contact"}}, {"ok": True}] * 2, 1
    ):
        ExecutionStepFactory.create(
            execution=failing, step_number=number, step_type=StepType.ACT,
            tool_name="crm_get_contact", tool_output=output,
        )  # fmt: skip

    page = login(staff).get(admin_url(ExecutionFactory._meta.model, "changelist"))
    cells = sorted(re.findall(r'class="field-status_shown[^"]*">([^<]*)<', page.content.decode()))
    assert cells == ["Completed", "Completed · 2 tool calls failed"]
