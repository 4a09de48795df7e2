"""What a script gives back: a table, charts, its output and its CPU seconds."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tools.sandbox.base import SandboxRequest
from tools.sandbox.bubblewrap import BubblewrapExecutor

pytestmark = pytest.mark.slow  # starts sandboxes

ANALYSIS = """
import pandas as pd
import matplotlib.pyplot as plt

df = pd.read_csv("/data/sales.csv")
totals = df.groupby("region", as_index=False)["amount"].sum()
totals.plot.bar(x="region", y="amount", title="Sales by region")
print("regions:", len(totals))
result = totals
"""


def test_pandas_over_a_csv_gives_a_table_and_a_png_chart(
    sandbox: BubblewrapExecutor, sales_csv: Path
) -> None:
    guarded = BubblewrapExecutor(limits=sandbox.limits)  # with the policy, as in production
    result = guarded.run(SandboxRequest(code=ANALYSIS, files={"sales.csv": sales_csv}))
    assert result.status == "ok", (result.error, result.stderr)
    assert result.stdout == "regions: 2\n"
    assert result.table is not None
    assert result.table.columns == ["region", "amount"]
    assert result.table.rows == [["north", 15], ["south", 27]]
    assert (result.table.row_count, result.table.truncated) == (2, False)
    (chart,) = result.charts
    assert chart.startswith(b"\x89PNG\r\n\x1a\n")
    assert result.cpu_seconds > 0


def test_a_long_table_keeps_its_first_rows_and_says_how_many(sandbox: BubblewrapExecutor) -> None:
    code = "import pandas as pd\nresult = pd.DataFrame({'n': range(1000)})\n"
    result = sandbox.run(SandboxRequest(code=code))
    assert result.table is not None
    assert len(result.table.rows) == sandbox.limits.table_rows
    assert (result.table.row_count, result.table.truncated) == (1000, True)


def test_a_result_that_is_not_a_table_comes_back_as_its_repr(sandbox: BubblewrapExecutor) -> None:
    result = sandbox.run(SandboxRequest(code="result = {'mean': 2.5}"))
    assert (result.status, result.table, result.value) == ("ok", None, "{'mean': 2.5}")


def test_a_scripts_exception_is_its_error_with_its_line(sandbox: BubblewrapExecutor) -> None:
    result = sandbox.run(SandboxRequest(code="x = 1\ny = x / 0\n"))
    assert result.status == "error"
    assert 'File "<script>", line 2' in result.error
    assert result.error.endswith("ZeroDivisionError: division by zero")


def test_the_calling_process_never_imports_pandas(sales_csv: Path) -> None:
    # The web and worker processes run the sandbox; only the sandboxed child pays for pandas.
    probe = f"""
import sys
from pathlib import Path
from tools.sandbox.base import SandboxRequest
from tools.sandbox.bubblewrap import BubblewrapExecutor
executor = BubblewrapExecutor()
if executor.unavailable():
    sys.exit(3)
code = "import pandas as pd\\nresult = pd.read_csv('/data/sales.csv')"
result = executor.run(SandboxRequest(code=code, files={{"sales.csv": Path({str(sales_csv)!r})}}))
assert result.table is not None and result.table.row_count == 4, result
assert not {{"pandas", "matplotlib", "numpy"}} & set(sys.modules), sorted(sys.modules)
"""
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False
    )
    if done.returncode == 3:
        pytest.skip("no bubblewrap sandbox on this machine")
    assert done.returncode == 0, done.stderr
