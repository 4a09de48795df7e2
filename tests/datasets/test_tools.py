"""The analysis tools over an agency's datasets: each guardrail refused with a clear tool error,
the agency's datasets only, results as table artefacts (first rows inline, all downloadable)."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from django.db import transaction
from django.test import override_settings

from agents.llm import ToolCall as LLMToolCall
from agents.models import Execution
from core import tenancy
from core.models import Agency
from datasets.models import DatasetResult
from datasets.query_plan import SCHEMA_JSON
from datasets.services import dataset_register_query
from tests.crm.factories import ContactFactory
from tests.datasets.helpers import upload
from tests.tools.builtin.conftest import call, call_error
from tools.calls import CallRequest
from tools.executor import execute_tool_call
from tools.handlers import ToolContext
from tools.models import Tool, ToolCall, ToolCallStatus

pytestmark = pytest.mark.django_db


@pytest.fixture
def agency(execution: Execution) -> Agency:
    upload(execution.agency)
    return execution.agency


@pytest.mark.usefixtures("agency")
def test_list_and_schema_show_the_agencys_datasets(ctx: ToolContext) -> None:
    listed = call(ctx, "list_datasets", {})
    schema = call(ctx, "get_dataset_schema", {"dataset": "sales"})

    assert [d["name"] for d in listed["datasets"]] == ["sales"]
    assert listed["datasets"][0]["table"] == "datasets.sales"
    assert [c["name"] for c in schema["columns"]] == ["region", "amount", "order_date", "status"]
    assert schema["row_count"] == 4
    assert schema["columns"][0]["samples"] == ["east", "north", "south"]


@pytest.mark.usefixtures("agency")
def test_execute_sql_answers_with_a_table_artefact(ctx: ToolContext) -> None:
    result = call(
        ctx,
        "execute_sql",
        {"sql": "SELECT region, sum(amount) AS total FROM sales GROUP BY region ORDER BY total"},
    )

    assert result["rows"] == [["east", 3.0], ["north", 17.75], ["south", 20.0]]
    assert [c["name"] for c in result["columns"]] == ["region", "total"]
    assert result["sql"].startswith('SELECT region, SUM(amount) AS total FROM datasets."sales"')
    with tenancy.agency_context(ctx.agency_id):
        saved = DatasetResult.objects.get(pk=result["result_id"])
    assert saved.execution_id == ctx.execution_id
    assert saved.tool_call_id == ctx.tool_call_id
    assert list(csv.reader(io.StringIO(bytes(saved.csv).decode()))) == [
        ["region", "total"],
        ["east", "3.0"],
        ["north", "17.75"],
        ["south", "20.0"],
    ]
    assert result["download"] == f"/api/v1/analysis/results/{saved.id}/download/"


@pytest.mark.usefixtures("agency")
@override_settings(AGENTDESK_DATASET_INLINE_ROWS=2, AGENTDESK_DATASET_RESULT_MAX_ROWS=3)
def test_the_first_rows_are_inline_and_the_result_stops_at_the_row_limit(
    ctx: ToolContext,
) -> None:
    result = call(ctx, "execute_sql", {"sql": "SELECT s.amount FROM sales s, sales t ORDER BY 1"})

    assert len(result["rows"]) == 2
    assert result["row_count"] == 3
    assert result["truncated"] is True
    with tenancy.agency_context(ctx.agency_id):
        saved = DatasetResult.objects.get(pk=result["result_id"])
    assert bytes(saved.csv).decode().count("\n") == 4  # the header and 3 rows


@pytest.mark.usefixtures("agency")
@pytest.mark.parametrize(
    ("sql", "code"),
    [
        ("DROP TABLE sales", "not_select"),
        ("DELETE FROM sales", "not_select"),
        ("SELECT 1; DROP TABLE sales", "multiple_statements"),
        ("SELECT * FROM read_csv('/etc/passwd')", "function_not_allowed"),
        ("SELECT * FROM 'https://example.com/x.parquet'", "file_access_not_allowed"),
        ("SELECT nothing_here FROM sales", "query_failed"),
    ],
)
def test_each_guardrail_is_a_tool_error_that_says_why(
    ctx: ToolContext, sql: str, code: str
) -> None:
    error = call_error(ctx, "execute_sql", {"sql": sql})

    assert error.code == code
    assert error.message
    with tenancy.agency_context(ctx.agency_id):
        assert not DatasetResult.objects.exists()


@pytest.mark.usefixtures("agency")
@override_settings(AGENTDESK_DATASET_QUERY_TIMEOUT_SECONDS=0.2)
def test_a_query_past_the_time_limit_is_stopped(ctx: ToolContext) -> None:
    error = call_error(
        ctx,
        "execute_sql",
        {
            "sql": "SELECT count(*) FROM sales a, sales b, sales c, sales d, sales e, sales f, "
            "sales g, sales h, sales i, sales j, sales k, sales l, sales m, sales n, sales o"
        },
    )

    assert error.code == "query_timeout"
    # The same call works again: nothing of the stopped query is left behind.
    assert call(ctx, "execute_sql", {"sql": "SELECT count(*) AS n FROM sales"})["rows"] == [[4]]


@pytest.mark.usefixtures("agency")
def test_another_agencys_dataset_is_not_there(ctx: ToolContext, other_ctx: ToolContext) -> None:
    with tenancy.agency_context(other_ctx.agency_id):
        other = Agency.objects.get(pk=other_ctx.agency_id)
    upload(other, name="secrets")

    error = call_error(ctx, "execute_sql", {"sql": "SELECT * FROM secrets"})
    schema_error = call_error(ctx, "get_dataset_schema", {"dataset": "secrets"})
    plan_error = call_error(
        ctx, "execute_query_plan", {"dataset": "secrets", "select": [{"agg": "count"}]}
    )

    assert error.code == "unknown_dataset"
    assert error.message == "There is no dataset 'secrets' in this agency; there are: sales."
    assert schema_error.code == "not_found"
    assert plan_error.code == "not_found"
    assert [d["name"] for d in call(other_ctx, "list_datasets", {})["datasets"]] == ["secrets"]
    assert [d["name"] for d in call(ctx, "list_datasets", {})["datasets"]] == ["sales"]


@pytest.mark.usefixtures("agency")
def test_execute_query_plan_compiles_and_runs(ctx: ToolContext) -> None:
    plan = {
        "dataset": "sales",
        "select": [
            {"column": "order_date", "grain": "month", "as": "month"},
            {"agg": "sum", "column": "amount", "as": "total"},
            {"agg": "count", "as": "orders"},
        ],
        "filters": [{"column": "status", "op": "eq", "value": "paid"}],
        "group_by": ["month"],
        "order_by": [{"column": "month"}],
    }

    result = call(ctx, "execute_query_plan", plan)

    assert result["rows"] == [["2030-01-01", 30.5, 2], ["2030-02-01", 3.0, 1]]
    assert "DATE_TRUNC('MONTH'" in result["sql"].upper()


@pytest.mark.usefixtures("agency")
def test_a_plan_that_does_not_fit_its_dataset_is_a_tool_error(ctx: ToolContext) -> None:
    missing = call_error(
        ctx, "execute_query_plan", {"dataset": "sales", "select": [{"column": "colour"}]}
    )
    ungrouped = call_error(
        ctx,
        "execute_query_plan",
        {"dataset": "sales", "select": [{"column": "region"}, {"agg": "sum", "column": "amount"}]},
    )

    assert missing.code == "invalid_plan"
    assert "colour" in missing.message
    assert ungrouped.code == "invalid_plan"
    assert "group_by" in ungrouped.message


def test_the_seeded_tool_takes_the_query_plan_schema(db: None) -> None:
    with tenancy.platform_context():
        tool = Tool.objects.get(name="execute_query_plan", is_system=True)

    assert tool.parameters_schema == SCHEMA_JSON


def test_a_crm_query_dataset_reads_the_agencys_contacts_now(
    ctx: ToolContext, other_ctx: ToolContext
) -> None:
    with tenancy.agency_context(ctx.agency_id):
        agency = Agency.objects.get(pk=ctx.agency_id)
    ContactFactory.create(agency=agency, first_name="Ada", status="customer")
    ContactFactory.create(agency=agency, first_name="Bob", status="lead")
    with tenancy.agency_context(other_ctx.agency_id):
        ContactFactory.create(
            agency=Agency.objects.get(pk=other_ctx.agency_id), first_name="Eve", status="customer"
        )
    with tenancy.agency_context(agency.id):
        dataset = dataset_register_query(
            agency=agency,
            name="customers",
            query={
                "entity_type": "contacts",
                "filters": {"status": "customer"},
                "fields": ["first_name", "status", "created_at"],
            },
        )
    assert dataset.row_count == 1
    assert [c["name"] for c in dataset.columns] == ["first_name", "status", "created_at"]
    ContactFactory.create(agency=agency, first_name="Cy", status="customer")

    result = call(ctx, "execute_sql", {"sql": "SELECT first_name FROM customers ORDER BY 1"})

    assert result["rows"] == [["Ada"], ["Cy"]]


@pytest.mark.usefixtures("agency")
def test_through_the_executor_a_refused_query_is_a_failed_call_and_the_step_goes_on(
    execution: Execution,
) -> None:
    with tenancy.platform_context():
        tool = Tool.objects.get(name="execute_sql", is_system=True)
    offered: dict[str, Any] = {
        "execute_sql": {
            "name": "execute_sql",
            "description": "",
            "parameters": tool.parameters_schema,
        }
    }

    def request(call_id: str, args: dict[str, Any], tools: dict[str, Any]) -> CallRequest:
        return CallRequest(
            agency_id=execution.agency_id,
            site_id=execution.site_id,
            agent_id=execution.agent_id,
            execution_id=execution.id,
            call=LLMToolCall(id=call_id, name="execute_sql", arguments=args, raw_arguments="{}"),
            tools=tools,
            constraints=[],
            may_have_run=False,
        )

    with transaction.atomic(), tenancy.agency_context(execution.agency_id):
        refused = execute_tool_call(request("c1", {"sql": "DROP TABLE sales"}, offered))
        unknown_argument = execute_tool_call(request("c2", {"sql": "SELECT 1", "x": 1}, offered))
        not_offered = execute_tool_call(request("c3", {"sql": "SELECT 1"}, {}))
        answered = execute_tool_call(request("c4", {"sql": "SELECT count(*) FROM sales"}, offered))
        calls = dict(
            ToolCall.objects.filter(execution_id=execution.id).values_list("tool_call_id", "status")
        )

    assert refused.output["error"]["code"] == "not_select"
    assert unknown_argument.output["error"]["code"] != "not_select"  # the schema, before the SQL
    assert not_offered.output["error"]["code"] == "tool_not_allowed"
    assert answered.output["rows"] == [[4]]
    assert calls["c1"] == ToolCallStatus.FAILED
    assert calls["c4"] == ToolCallStatus.COMPLETED
