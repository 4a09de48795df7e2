"""The experiments' tool gate on its own: a run that is no experiment's is not its business (no
query, no verdict); an experiment's call is answered from the recording when the tool and the
canonical arguments match, and refused as unrecorded otherwise."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from agents.llm import ToolCall as LLMToolCall
from evals import recordings
from evals.matching import index
from evals.tool_gate import UNRECORDED, RecordedReplies
from tools.calls import CallRequest
from tools.gates import Answer, Refuse

POLICY: Any = {"name": "crm_get_contact", "description": "", "parameters": {}}


def _request(execution_id: uuid.UUID, arguments: dict[str, Any]) -> CallRequest:
    return CallRequest(
        agency_id=uuid.uuid4(), site_id=uuid.uuid4(), agent_id=uuid.uuid4(),
        execution_id=execution_id,
        call=LLMToolCall.from_raw(id="c1", name="crm_get_contact", raw_arguments=arguments),
        tools={"crm_get_contact": POLICY}, constraints=[],
    )  # fmt: skip


@pytest.fixture
def experiment_run() -> Iterator[uuid.UUID]:
    execution_id = uuid.uuid4()
    recorded = {"tool": "crm_get_contact", "arguments": {"id": "c9", "fields": ["email", "name"]},
                "output": {"name": "Marcus"}, "status": "completed"}  # fmt: skip
    recordings.put(execution_id, index([recorded]))
    yield execution_id
    recordings.drop(execution_id)


def test_a_run_that_is_no_experiments_gets_no_verdict_and_no_query() -> None:
    # No database access in this test: a query would fail it.
    request = _request(uuid.uuid4(), {"id": "c9"})
    assert RecordedReplies().before_handler(request, POLICY) is None


def test_a_matching_call_is_answered_and_any_other_refused(experiment_run: uuid.UUID) -> None:
    gate = RecordedReplies()
    same = _request(experiment_run, {"fields": ["email", "name"], "id": "c9"})  # keys reordered
    assert gate.before_handler(same, POLICY) == Answer({"name": "Marcus"}, "completed")
    other = gate.before_handler(_request(experiment_run, {"id": "c9"}), POLICY)
    assert isinstance(other, Refuse)
    assert (other.code, other.status) == (UNRECORDED, "denied")
    assert "no recorded reply for crm_get_contact" in other.message
