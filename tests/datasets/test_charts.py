"""execute_python's charts (issue 30): a figure a script leaves open is a PNG artefact of its call
(the model is told its id, never given its bytes) shown on the run page; the image is served to
staff of the run's agency only, as a PNG no shared cache keeps; what is not a PNG, or is too large,
is dropped and the model told so."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from django.test import Client, override_settings

from agents.models import Execution
from core import tenancy
from core.models import Agency, Role, User
from datasets.chart_admin import chart_url
from datasets.charts import SIGNATURE, charts_keep
from datasets.models import DatasetChart
from tests.admin.conftest import member
from tests.admin.helpers import admin_url
from tests.datasets.factories import DatasetChartFactory, png
from tests.datasets.helpers import upload
from tests.tools.builtin.conftest import call
from tools.handlers import ToolContext
from tools.sandbox.bubblewrap import BubblewrapExecutor

pytestmark = pytest.mark.django_db

PLOT = """
import pandas as pd
import matplotlib.pyplot as plt

df = pd.read_csv("/data/sales.csv")
df.groupby("region")["amount"].sum().plot.bar(title="Sales by region")
"""


def _charts(execution: Execution) -> list[DatasetChart]:
    with tenancy.agency_context(execution.agency_id):
        return list(DatasetChart.objects.filter(execution=execution))


@pytest.mark.slow  # starts a sandbox
def test_a_script_that_plots_leaves_a_chart_its_run_page_shows_to_its_agency_only(
    ctx: ToolContext,
    execution: Execution,
    other_agency: Agency,
    login: Callable[[User], Client],
) -> None:
    reason = BubblewrapExecutor().unavailable()
    if reason:
        pytest.skip(f"no bubblewrap sandbox on this machine: {reason}")
    upload(execution.agency)

    output = call(ctx, "execute_python", {"code": PLOT, "datasets": ["sales"]})

    [chart] = _charts(execution)
    assert output["charts"] == 1
    assert output["chart_ids"] == [str(chart.id)]
    assert "iVBOR" not in json.dumps(output)  # the model gets the reference, not the PNG
    assert (chart.tool_call_id, chart.tool_name) == (ctx.tool_call_id, "execute_python")
    assert bytes(chart.png).startswith(SIGNATURE)
    assert chart.width > 100
    assert chart.height > 100
    assert chart.size_bytes == len(bytes(chart.png))

    staff = login(member(execution.agency, Role.STAFF))
    page = staff.get(admin_url(Execution, "change", execution.pk)).content.decode()
    url = chart_url(execution.pk, chart.pk)
    assert "Charts" in page
    assert f'<img src="{url}"' in page
    image = staff.get(url)
    assert image.status_code == 200
    assert image.content == bytes(chart.png)
    assert image["Content-Type"] == "image/png"
    assert image["X-Content-Type-Options"] == "nosniff"
    assert {"private", "no-store"} <= {d.strip() for d in image["Cache-Control"].split(",")}

    stranger = login(member(other_agency, Role.ADMIN))
    assert stranger.get(url).status_code == 404


def test_another_agencys_staff_get_a_404_for_a_chart(
    agency: Agency, other_agency: Agency, login: Callable[[User], Client]
) -> None:
    chart = DatasetChartFactory.create(execution__agent__agency=agency)
    url = chart_url(chart.execution_id, chart.pk)

    assert login(member(agency, Role.VIEWER)).get(url).status_code == 200
    assert login(member(other_agency, Role.ADMIN)).get(url).status_code == 404
    # Nor under a run of their own agency: the chart is looked up within the run.
    theirs = DatasetChartFactory.create(execution__agent__agency=other_agency)
    assert (
        login(member(other_agency, Role.ADMIN))
        .get(chart_url(theirs.execution_id, chart.pk))
        .status_code
        == 404
    )
    assert login(member(agency, Role.STAFF)).get(url[:-4] + "nope.png").status_code == 404


def test_a_run_without_charts_has_no_charts_section(
    agency: Agency, login: Callable[[User], Client]
) -> None:
    from tests.agents.factories import ExecutionFactory

    run = ExecutionFactory.create(agent__agency=agency)
    page = login(member(agency, Role.STAFF)).get(admin_url(Execution, "change", run.pk))
    assert page.status_code == 200
    assert "dataset-charts" not in page.content.decode()


@override_settings(AGENTDESK_DATASET_CHART_MAX_BYTES=500)
def test_what_is_not_a_png_or_is_too_large_is_dropped_and_said(execution: Execution) -> None:
    small, large = png(2, 1), png(400, 300)
    assert len(small) < 500 < len(large)
    with tenancy.agency_context(execution.agency_id):
        kept = charts_keep(
            agency_id=execution.agency_id,
            execution_id=execution.id,
            tool_call_id="call_1",
            tool_name="execute_python",
            charts=[b"<html><script>alert(1)</script>", small, large],
        )

    [chart] = _charts(execution)
    assert kept.ids == [str(chart.id)]
    assert (chart.position, chart.width, chart.height) == (1, 2, 1)
    assert kept.dropped == "not kept: 1 larger than 500 bytes, 1 not a PNG image"
