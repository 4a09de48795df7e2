"""`manage.py up` starts web, worker and beat with two glibc malloc arenas
(``MALLOC_ARENA_MAX=2``): with glibc's default (8 per core) the web server, which runs each
request's sync code on a new thread, and the worker's 64 threads kept growing over soaks
(bench/README.md "Soak"). A value in the environment wins."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pytest

from devkit.management.commands.up import Command, web_url

SERVICES = SimpleNamespace(
    database="postgres://app@127.0.0.1:1/x", database_owner="postgres://o@127.0.0.1:1/x",
    redis="redis://127.0.0.1:1/0",
)  # fmt: skip
# 16 threads that allocate, all alive together (each would get an arena of its own with glibc's
# default on 2 cores), and the number of arenas in glibc's own report.
COUNT_ARENAS = """
import ctypes, threading
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype, libc.free.argtypes = ctypes.c_void_p, [ctypes.c_void_p]
started, done = threading.Barrier(17), threading.Event()
def allocate():
    block = libc.malloc(1000)
    started.wait()
    done.wait()
    libc.free(block)
threads = [threading.Thread(target=allocate) for _ in range(16)]
for thread in threads:
    thread.start()
started.wait()
size, buffer = ctypes.c_size_t(), ctypes.c_char_p()
libc.open_memstream.restype = ctypes.c_void_p
stream = ctypes.c_void_p(libc.open_memstream(ctypes.byref(buffer), ctypes.byref(size)))
libc.malloc_info(0, stream)
libc.fclose(stream)
print(ctypes.string_at(buffer, size.value).decode().count("<heap nr="))
done.set()
"""


def _child_env() -> dict[str, str]:
    url = web_url({"host": "127.0.0.1", "port": 8123})
    return Command()._child_env(SERVICES, None, base_url=url)


def _arenas_in(env: dict[str, str]) -> int:
    done = subprocess.run(
        [sys.executable, "-c", COUNT_ARENAS], env=env, capture_output=True, text=True, check=True
    )
    return int(done.stdout)


def test_children_run_on_two_malloc_arenas(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)

    env = _child_env()

    assert env["MALLOC_ARENA_MAX"] == "2"
    assert _arenas_in(env) == 2  # 16 threads allocating at once: glibc's default gives them 16


def test_a_value_in_the_environment_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")

    assert _child_env()["MALLOC_ARENA_MAX"] == "4"
