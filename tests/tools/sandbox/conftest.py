from __future__ import annotations

import functools
from pathlib import Path

import pytest

from tools.sandbox.base import SandboxLimits
from tools.sandbox.bubblewrap import BubblewrapExecutor

# Small limits: each attack is stopped in seconds.
LIMITS = SandboxLimits(wall_seconds=20, cpu_seconds=3, memory_mb=768, processes=16)


@functools.cache
def _unavailable() -> str:
    return BubblewrapExecutor().unavailable()


@pytest.fixture
def sandbox() -> BubblewrapExecutor:
    """The real bubblewrap sandbox, with the AST policy OFF: what it stops, it stops alone."""
    reason = _unavailable()
    if reason:
        pytest.skip(f"no bubblewrap sandbox on this machine: {reason}")
    return BubblewrapExecutor(limits=LIMITS, policy=False)


@pytest.fixture
def sales_csv(tmp_path: Path) -> Path:
    path = tmp_path / "sales.csv"
    path.write_text("region,month,amount\nnorth,1,10\nsouth,1,20\nnorth,2,5\nsouth,2,7\n")
    return path
