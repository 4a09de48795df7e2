"""What every sandbox executor takes and gives back, whatever runs the script (bubblewrap here, a
Kubernetes Job in a cluster): the interface ``execute_python`` is written against."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

# A dataset's file is shown to the script as /data/<name>: a plain file name, nothing to climb out.
FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,120}$")
DATA_DIR = "/data"
SCRATCH_DIR = "/tmp"  # noqa: S108 - the sandbox's own tmpfs, not the host's /tmp

Status = Literal[
    "ok",  # the script ran to its end
    "error",  # the script raised (its traceback is in ``error``)
    "policy",  # refused by the AST policy before anything ran
    "timeout",  # killed at the wall-clock deadline
    "cpu_limit",  # killed at its CPU-seconds limit
    "memory_limit",  # an allocation refused at its memory limit
    "output_limit",  # killed for writing more than the result may hold
    "crashed",  # ended without a result (a signal, the sandbox failing to start)
]


class SandboxError(Exception):
    """The sandbox cannot run anything here (bubblewrap missing, no namespaces)."""


@dataclass(frozen=True)
class SandboxLimits:
    wall_seconds: float = 30.0
    cpu_seconds: int = 10
    memory_mb: int = 1024
    processes: int = 32
    stdout_bytes: int = 64 * 1024
    scratch_mb: int = 64
    result_bytes: int = 8 * 1024 * 1024  # the table and the charts, base64 included
    table_rows: int = 200
    charts: int = 5
    code_bytes: int = 100 * 1024


@dataclass(frozen=True)
class SandboxRequest:
    code: str
    # The read-only inputs: name shown under /data -> the file on this machine.
    files: Mapping[str, Path] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in self.files:
            if not FILE_NAME.match(name) or name in {".", ".."}:
                raise ValueError(f"not a plain file name for /data: {name!r}")


@dataclass(frozen=True)
class Table:
    columns: list[str]
    rows: list[list[Any]]
    row_count: int  # all the rows the script's table had; ``rows`` holds the first ones
    truncated: bool


@dataclass(frozen=True)
class SandboxResult:
    status: Status
    stdout: str = ""
    stdout_truncated: bool = False
    stderr: str = ""
    error: str = ""
    table: Table | None = None
    value: str | None = None  # repr of a ``result`` that is not a table
    charts: list[bytes] = field(default_factory=list)  # PNG files
    cpu_seconds: float = 0.0  # the sandbox's own processes, from the kernel's rusage
    wall_seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class Executor(Protocol):
    """Runs one script under ``limits`` and returns what it left; never raises for what the script
    did (that is a status), only :class:`SandboxError` when it cannot run at all."""

    limits: SandboxLimits

    def run(self, request: SandboxRequest) -> SandboxResult: ...
