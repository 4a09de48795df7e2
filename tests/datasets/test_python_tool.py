"""execute_python over the agency's datasets, in the real sandbox: a table artefact and a chart,
the CPU seconds on the call, and each refusal or overrun a structured tool error."""

from __future__ import annotations

import pytest
from django.test import override_settings

from agents.models import Execution
from core import tenancy
from core.models import Agency
from datasets.models import DatasetResult
from tests.datasets.helpers import upload
from tests.tools.builtin.conftest import call, call_error
from tools.handlers import ToolContext
from tools.sandbox.bubblewrap import BubblewrapExecutor

pytestmark = [pytest.mark.django_db, pytest.mark.slow]  # starts sandboxes

ANALYSIS = """
import pandas as pd
import matplotlib.pyplot as plt

df = pd.read_csv("/data/sales.csv")
totals = df.groupby("region", as_index=False)["amount"].sum().sort_values("amount")
totals.plot.bar(x="region", y="amount")
print("regions", len(totals))
result = totals
"""


@pytest.fixture(autouse=True)
def _bubblewrap() -> None:
    reason = BubblewrapExecutor().unavailable()
    if reason:
        pytest.skip(f"no bubblewrap sandbox on this machine: {reason}")


@pytest.fixture
def agency(execution: Execution) -> Agency:
    upload(execution.agency)
    return execution.agency


@pytest.mark.usefixtures("agency")
def test_a_script_over_a_dataset_answers_with_a_table_artefact(ctx: ToolContext) -> None:
    output = call(ctx, "execute_python", {"code": ANALYSIS, "datasets": ["sales"]})

    assert output["stdout"] == "regions 3\n"
    assert output["columns"] == [{"name": "region", "type": ""}, {"name": "amount", "type": ""}]
    assert output["rows"] == [["east", 3.0], ["north", 17.75], ["south", 20.0]]
    assert output["charts"] == 1
    assert output["cpu_seconds"] > 0  # recorded with the call's output
    with tenancy.agency_context(ctx.agency_id):
        saved = DatasetResult.objects.get(pk=output["result_id"])
    assert (saved.tool_name, saved.execution_id, saved.row_count) == (
        "execute_python",
        ctx.execution_id,
        3,
    )
    assert bytes(saved.csv).decode().splitlines()[1] == "east,3.0"


@pytest.mark.usefixtures("agency")
def test_the_policy_refuses_with_a_tool_error(ctx: ToolContext) -> None:
    error = call_error(ctx, "execute_python", {"code": "import os\nos.listdir('/')"})
    assert error.code == "policy_refused"
    assert "line 1: import of 'os' is not allowed" in error.message


@pytest.mark.usefixtures("agency")
@override_settings(AGENTDESK_SANDBOX_WALL_SECONDS=2)
def test_an_overrun_is_a_tool_error_with_its_cost(ctx: ToolContext) -> None:
    error = call_error(
        ctx, "execute_python", {"code": "import time\nwhile True:\n    time.sleep(1)"}
    )
    assert error.code == "timeout"
    assert error.message == "killed at the wall-clock deadline of 2 s"
    assert "cpu_seconds" in error.details


@pytest.mark.usefixtures("agency")
def test_a_scripts_exception_is_a_script_error(ctx: ToolContext) -> None:
    error = call_error(ctx, "execute_python", {"code": "x = 1 / 0"})
    assert error.code == "script_error"
    assert error.message.endswith("ZeroDivisionError: division by zero")


@pytest.mark.usefixtures("agency")
def test_another_agencys_dataset_is_not_found(other_ctx: ToolContext) -> None:
    error = call_error(other_ctx, "execute_python", {"code": "x = 1", "datasets": ["sales"]})
    assert error.code == "not_found"
