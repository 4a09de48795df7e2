"""The AST policy: the first fence (test_attacks.py shows the sandbox holds without it)."""

from __future__ import annotations

import pytest

from tools.sandbox.policy import check

ANALYSIS = """
import pandas as pd
import numpy as np
import matplotlib.pyplot as plt
from collections import Counter
from datetime import date

df = pd.read_csv("/data/sales.csv")
totals = df.groupby("region", as_index=False)["amount"].sum()
totals["share"] = np.round(totals["amount"] / totals["amount"].sum(), 3)
totals.plot.bar(x="region", y="amount")
print(Counter(df["region"]).most_common(1), date(2026, 1, 1))
result = totals
"""


def test_a_typical_analysis_script_passes() -> None:
    assert check(ANALYSIS) == []


@pytest.mark.parametrize(
    ("code", "refusal"),
    [
        ("import os", "import of 'os' is not allowed"),
        ("import subprocess", "import of 'subprocess'"),
        ("import socket", "import of 'socket'"),
        ("from importlib import import_module", "import of 'importlib'"),
        ("import numpy.ctypeslib", "import of 'numpy.ctypeslib'"),
        ("from pandas import io", "import of 'pandas.io'"),
        ("from math import *", "'from math import *'"),
        ("from . import x", "relative imports"),
        ("x = ().__class__.__bases__[0].__subclasses__()", "'__subclasses__'"),
        ("x = __builtins__", "'__builtins__'"),
        ("__import__('os')", "'__import__'"),
        ("getattr((), '_' + '_class_' + '_')", "getattr() is not allowed"),
        ("eval('1')", "eval() is not allowed"),
        ("exec('x = 1')", "exec() is not allowed"),
        ("open('/etc/passwd')", "open() is not allowed"),
        ("df.to_csv('/tmp/x.csv')", ".to_csv() is not allowed"),
        ("df.to_parquet('x')", ".to_parquet() is not allowed"),
        ("plt.savefig('x.png')", ".savefig() is not allowed"),
        ("np.save('x', a)", ".save() is not allowed"),
        ("f = '{0.__class__}'.format(1)", "strings containing '__'"),
        ("def f(__x): pass", "the name '__x'"),
        ("class __C: pass", "the name '__C'"),
        ("def f():\n    global y", "global is not allowed"),
        ("async def f(): pass", "async code"),
        ("x = (", "syntax error"),
    ],
)
def test_the_policy_refuses(code: str, refusal: str) -> None:
    violations = check(code)
    assert violations, code
    assert refusal in str(violations[0])


def test_a_refusal_names_its_line() -> None:
    (violation,) = check("x = 1\nimport os\n")
    assert violation.line == 2
    assert str(violation).startswith("line 2: import of 'os'")


def test_a_script_over_the_size_limit_is_refused() -> None:
    (violation,) = check("x = 1\n" * 100, max_bytes=100)
    assert "longer than 100 bytes" in violation.message
