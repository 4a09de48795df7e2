"""The demo data analyst end to end (issue 30), on a real Celery worker, the real ASGI server and
headless Chromium: "Who are our best customers?" is understood below the threshold and asks which
measure "best" means (a question in the inbox); answered over the API, the run resumes from
understanding, ranks the demo dataset with execute_sql (a table result) and draws the top five
with execute_python in the sandbox (a chart); the run page shows both, at 1440 and 390 px
(README "Datasets" shows the 1440 px screenshot: docs/img/analyst-run.png)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.sync_api import Browser, expect

from agents.models import Agent, DecisionPoint, ExecutionStatus, StepType
from agents.services import execution_create
from approvals.models import Question
from core import tenancy
from core.models import Role
from datasets.models import DatasetChart, DatasetResult
from datasets.services import dataset_upload
from devkit.demo.data import AGENTS, DATASETS
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.demo import demo_responder
from tests.admin.conftest import member
from tests.api.conftest import key_client
from tests.browser.conftest import DESKTOP, SHOTS, logged_in, look_at_both_widths
from tests.processes import AsgiServer, Worker, wait_for
from tools.models import ToolCall
from tools.sandbox.bubblewrap import BubblewrapExecutor

pytestmark = pytest.mark.slow
ANALYST = next(spec for spec in AGENTS if spec["slug"] == "data-analyst")["overrides"]


def test_the_demo_analyst_asks_then_answers_with_a_table_and_a_chart_on_its_run_page(
    browser: Browser,
    asgi_server: AsgiServer,
    celery_worker: Worker,
    fake_llm_server: FakeProviderServer,
    make_agent: Callable[..., Agent],
) -> None:
    reason = BubblewrapExecutor().unavailable()
    if reason:
        pytest.skip(f"no bubblewrap sandbox on this machine (the chart needs it): {reason}")
    agent = make_agent(
        "openai",
        name="Data Analyst",
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
            title=spec["title"],
            description=spec["description"],
            file_name="customer_sales.csv",
            content=spec["csv"].encode(),
        )
        started = execution_create(agent=agent, input="Who are our best customers?")
    assert started is not None

    # 1. Understood below the threshold: it asks, in the inbox, with the candidate measures.
    execution = wait_for(started, {ExecutionStatus.WAITING_INPUT}, timeout=90)
    with tenancy.agency_context(agent.agency_id):
        [question] = Question.objects.filter(execution=execution)
        [understood] = [
            (step.llm_response or {})["understanding"]
            for step in execution.steps.filter(step_type=StepType.REFLECT)
        ]
        [gate] = DecisionPoint.objects.filter(execution=execution, decision_type="clarification")
        acted = ToolCall.objects.filter(execution=execution).count()
    assert understood["confidence"] < understood["threshold"] == 0.7
    assert gate.chosen_option["choice"] == "ask"
    assert question.options == ["lead score", "deals won", "deal value"]
    assert acted == 0  # nothing ran before the person answered

    # 2. Answered through the API: the run resumes from understanding and completes.
    answer = key_client(agent.agency, Role.APPROVER).post(
        f"/api/v1/questions/{question.id}/answer/", {"answer": "deal value"}, format="json"
    )
    assert answer.status_code == 200, answer.content
    execution = wait_for(execution, timeout=180)
    assert execution.status == ExecutionStatus.COMPLETED, execution.error
    assert "by deal_value" in execution.output
    assert "bar chart" in execution.output

    # 3. A table (execute_sql) and a chart (execute_python) of the run.
    with tenancy.agency_context(agent.agency_id):
        calls = list(ToolCall.objects.filter(execution=execution).order_by("created_at"))
        [table] = DatasetResult.objects.filter(execution=execution)
        [chart] = DatasetChart.objects.filter(execution=execution)
    assert [c.tool_name for c in calls][-2:] == ["execute_sql", "execute_python"]
    assert all(c.status == "completed" for c in calls), [c.output for c in calls]
    assert "ORDER BY deal_value DESC" in table.sql
    assert table.row_count == 5
    assert chart.tool_call_id == calls[-1].tool_call_id
    assert chart.width > 300

    # 4. The run page shows the table's rows and the chart's image (loaded, not broken).
    user = member(agent.agency, Role.STAFF)
    page = logged_in(browser, asgi_server, user).new_page()
    page.goto(f"{asgi_server.url}/admin/agents/execution/{execution.pk}/change/")
    expect(page.locator(".dataset-result-of-run")).to_contain_text("Fabrikam")  # 87000, first
    image = page.locator(".dataset-chart img")
    expect(image).to_have_count(1)
    image.scroll_into_view_if_needed()
    page.wait_for_function(
        "() => { const i = document.querySelector('.dataset-chart img');"
        " return i && i.complete && i.naturalWidth > 0; }"
    )
    assert page.evaluate("document.querySelector('.dataset-chart img').naturalWidth") == (
        chart.width
    )
    page.evaluate(
        "document.querySelectorAll('img[loading=lazy]').forEach(i => i.loading = 'eager')"
    )
    look_at_both_widths(page, "analyst-run", phone_fits=False)
    # README's: the page at 1440 px down to its charts, in a window taller than that (so the
    # fixed sidebar, and the diagrams' sticky bar below, are drawn where they belong).
    bottom = page.evaluate(
        "Math.ceil(document.querySelector('.dataset-charts').getBoundingClientRect().bottom"
        " + window.scrollY) + 32"
    )
    page.set_viewport_size({"width": DESKTOP["width"], "height": bottom + 800})
    page.evaluate("window.scrollTo(0, 0)")
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(
        path=str(SHOTS / "analyst-run-readme.png"),
        clip={"x": 0, "y": 0, "width": DESKTOP["width"], "height": bottom},
    )
