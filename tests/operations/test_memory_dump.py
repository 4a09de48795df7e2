"""ops.memory_dump, the debugging aid behind ``bench.soak --memory-dumps``: off unless
``AGENTDESK_MEMORY_DUMP_DIR`` is set; then each SIGUSR2 makes a Django process write what its
memory holds, and from the second dump on what it allocated since the first and still holds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

from bench.soak.memory import compare

ROOT = Path(__file__).resolve().parents[2]
# A Django process (the settings' apps ready, as in web, worker and beat) says which SIGUSR2
# handler it has; with one, it is signalled, holds 2 MB more, and is signalled again.
SCRIPT = """import signal, django
django.setup()
print(repr(signal.getsignal(signal.SIGUSR2)), flush=True)
if signal.getsignal(signal.SIGUSR2) is not signal.SIG_DFL:
    signal.raise_signal(signal.SIGUSR2)
    held = [bytearray(4096) for _ in range(500)]  # still held at the second dump
    signal.raise_signal(signal.SIGUSR2)
"""
HOLDING_LINE = 6


def _run(env: dict[str, str]) -> str:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("PYTHONTRACEMALLOC")},
        "DJANGO_SETTINGS_MODULE": "config.settings.base",
        "DATABASE_URL": "postgres://app@127.0.0.1:1/x",  # not connected to
        "REDIS_URL": "redis://127.0.0.1:1/0",
        **env,
    }
    command = [sys.executable, "-c", SCRIPT]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[0]


def test_each_sigusr2_dumps_objects_arenas_and_what_was_allocated_since_the_first(
    tmp_path: Path,
) -> None:
    handler = _run({"AGENTDESK_MEMORY_DUMP_DIR": str(tmp_path)})

    assert "_on_signal" in handler
    first, second = sorted(tmp_path.glob("*.json"))
    before, after = json.loads(first.read_text()), json.loads(second.read_text())
    assert before["gc_objects"] > 1000
    assert before["types"]["builtins.dict"] > 100
    assert "kB" in before["status"]["VmRSS"]
    assert before["malloc_info"].startswith("<malloc")  # glibc's report of its arenas
    assert before["pymalloc"]["arenas allocated current"] > 0  # Python's small-object arenas
    assert before["pymalloc"]["bytes in allocated blocks"] > 0
    assert "tracemalloc" not in before  # tracing starts with the first dump...
    assert not first.with_suffix(".tracemalloc").exists()
    # ...so the second one holds the script's 2 MB, from the line that allocated it.
    snapshot = tracemalloc.Snapshot.load(str(second.with_suffix(".tracemalloc")))
    held = [s for s in snapshot.statistics("lineno") if s.traceback[0].lineno == HOLDING_LINE]
    assert held[0].size >= 500 * 4096, held
    assert after["tracemalloc"]["traced"] >= 500 * 4096

    report = compare(first, second)
    assert "gc objects" in report
    assert "malloc: {'arenas':" in report  # glibc's arenas, counted
    assert "pymalloc: {'arenas':" in report
    assert f'File "<string>", line {HOLDING_LINE}' in report  # the 2 MB's traceback


def test_without_the_variable_nothing_is_installed_or_written(tmp_path: Path) -> None:
    handler = _run({"AGENTDESK_MEMORY_DUMP_DIR": ""})

    assert "SIG_DFL" in handler
    assert not list(tmp_path.iterdir())
