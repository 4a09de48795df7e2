"""The demo data analyst (devkit's demo seed: understanding on, datasets tools) through a real
Celery worker on the demo model: "Who are our best customers?" asks which measure "best" means;
the answer over the API resumes the run from understanding, and it ranks the demo dataset by the
measure answered with execute_sql (a table result of the run)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agents.models import Agent, ExecutionStatus
from agents.services import execution_create
from approvals.models import Question
from core import tenancy
from core.models import Role
from datasets.models import DatasetResult
from datasets.services import dataset_upload
from devkit.demo.data import AGENTS, DATASETS
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.demo import demo_responder
from tests.api.conftest import key_client
from tests.processes import Worker, wait_for

pytestmark = pytest.mark.slow
ANALYST = next(spec for spec in AGENTS if spec["slug"] == "data-analyst")["overrides"]


def test_the_demo_analyst_asks_which_measure_then_ranks_the_dataset_by_the_answer(
    make_agent: Callable[..., Agent], fake_llm_server: FakeProviderServer, celery_worker: Worker
) -> None:
    agent = make_agent(
        "openai",
        allowed_tools=ANALYST["allowed_tools"],
        understanding_enabled=ANALYST["understanding_enabled"],
        system_prompt=ANALYST["system_prompt"],
    )
    fake_llm_server.set_responder(
        demo_responder(think_seconds=0, stream_interval=0), key=agent.llm_model
    )
    [spec] = DATASETS
    with tenancy.agency_context(agent.agency_id):
        dataset_upload(
            agency=agent.agency,
            name=spec["name"],
            file_name="customer_sales.csv",
            content=spec["csv"].encode(),
        )
        execution = execution_create(agent=agent, input="Who are our best customers?")
    assert execution is not None

    execution = wait_for(execution, {ExecutionStatus.WAITING_INPUT})
    with tenancy.agency_context(agent.agency_id):
        [question] = Question.objects.filter(execution=execution)
    assert question.options == ["lead score", "deals won", "deal value"]

    answer = key_client(agent.agency, Role.APPROVER).post(
        f"/api/v1/questions/{question.id}/answer/", {"answer": "deals won"}, format="json"
    )
    assert answer.status_code == 200, answer.content
    execution = wait_for(execution)

    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    assert "by deals_won" in execution.output
    assert execution.output.index("Contoso") < execution.output.index("Wide World")  # 9 > 7
    with tenancy.agency_context(agent.agency_id):
        [result] = DatasetResult.objects.filter(execution=execution)
    assert result.tool_name == "execute_sql"
    assert "ORDER BY deals_won DESC" in result.sql
    assert result.row_count == 5
