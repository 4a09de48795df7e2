"""Each attack an analysis script could try, run in the real bubblewrap sandbox with the AST
policy switched OFF (the ``sandbox`` fixture): the sandbox alone stops it, and the calling
process (a worker) is unharmed."""

from __future__ import annotations

import contextlib
import os
import resource
import socket
import time
from pathlib import Path

import psutil
import pytest

import config.settings.base
from tools.sandbox.base import SandboxLimits, SandboxRequest
from tools.sandbox.bubblewrap import BubblewrapExecutor
from tools.sandbox.policy import check

pytestmark = pytest.mark.slow  # each test starts sandboxes (a second or two each)


# Scripts print their pid namespace first: afterwards no process on the machine may be in it.
SAY_NAMESPACE = "import os\nprint(os.readlink('/proc/self/ns/pid'), flush=True)\n"


def _in_namespace(namespace: str) -> list[int]:
    found = []
    for pid in psutil.pids():
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{pid}/ns/pid") == namespace:
                found.append(pid)
    return found


def _nothing_left(stdout: str) -> None:
    """Every process the sandbox ran is gone: bwrap is reaped, its pid namespace emptied."""
    namespace = stdout.split("\n", 1)[0]
    assert namespace.startswith("pid:["), stdout[:200]
    assert namespace != os.readlink("/proc/self/ns/pid")  # a namespace of its own
    for _ in range(100):  # the kernel empties a namespace asynchronously after its init dies
        if not _in_namespace(namespace):
            return
        time.sleep(0.1)
    assert _in_namespace(namespace) == []


def test_network_access_is_refused(sandbox: BubblewrapExecutor) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.setblocking(False)
        port = listener.getsockname()[1]
        code = (
            "import socket\n"
            "print(sorted(name for _, name in socket.if_nameindex()))\n"
            f"socket.create_connection(('127.0.0.1', {port}), timeout=3)\n"
        )
        result = sandbox.run(SandboxRequest(code=code))
        with pytest.raises(BlockingIOError):
            listener.accept()  # nothing reached the host's loopback
    assert result.status == "error"
    assert result.stdout.strip() == "['lo']"  # a namespace of its own, no interface out
    assert "ConnectionRefusedError" in result.error or "unreachable" in result.error


def test_writing_outside_the_scratch_is_refused(
    sandbox: BubblewrapExecutor, sales_csv: Path
) -> None:
    before = sales_csv.read_bytes()
    code = """
import os
targets = ("/data/sales.csv", "/usr/pwned", "/pwned", "/proc/pwned", "/dev/pwned", "/sandbox/x.py")
for path in targets:
    try:
        with open(path, "w") as f:
            f.write("pwned")
        print("WROTE", path)
    except OSError as e:
        print("refused", path, e.errno)
with open("/tmp/scratch.txt", "w") as f:
    f.write("fine")
print("scratch", open("/tmp/scratch.txt").read())
"""
    result = sandbox.run(SandboxRequest(code=code, files={"sales.csv": sales_csv}))
    assert result.status == "ok", result.error
    assert "WROTE" not in result.stdout
    assert result.stdout.count("refused") == 6
    assert "scratch fine" in result.stdout
    assert sales_csv.read_bytes() == before
    assert not Path("/usr/pwned").exists()


def test_the_scratch_is_capped(sandbox: BubblewrapExecutor) -> None:
    code = "f = open('/tmp/big', 'wb')\nfor _ in range(200):\n    f.write(b'x' * 1024 * 1024)\n"
    result = sandbox.run(SandboxRequest(code=code))
    assert result.status in {"error", "crashed"}  # ENOSPC (tmpfs size) or SIGXFSZ (RLIMIT_FSIZE)
    assert result.status != "ok"


def test_reading_outside_the_data_is_refused(
    sandbox: BubblewrapExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTDESK_CANARY_SECRET", "s3cret-canary")
    settings_file = config.settings.base.__file__
    code = f"""
import os
for path in ("/etc/shadow", "/etc/passwd", {settings_file!r}, "/root/.ssh/id_rsa"):
    try:
        print("GOT", path, open(path).read()[:40])
    except OSError as e:
        print("refused", path, type(e).__name__)
print("pids", sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))
print("cmdlines", [open(f"/proc/{{p}}/cmdline").read() for p in os.listdir("/proc") if p.isdigit()])
print("env", sorted(os.environ))
print("uid", os.getuid())
"""
    result = sandbox.run(SandboxRequest(code=code))
    assert result.status == "ok", result.error
    assert "GOT " not in result.stdout
    assert "refused /etc/shadow" in result.stdout
    assert f"refused {settings_file}" in result.stdout
    # Only the sandbox's own processes: none of the host's (pytest, PostgreSQL ...).
    assert "pytest" not in result.stdout
    assert "postgres" not in result.stdout
    assert "s3cret-canary" not in result.stdout
    assert "AGENTDESK_CANARY_SECRET" not in result.stdout
    assert "DJANGO_SETTINGS_MODULE" not in result.stdout
    assert "uid 0" not in result.stdout


def test_a_fork_bomb_is_stopped(sandbox: BubblewrapExecutor) -> None:
    limit = resource.getrlimit(resource.RLIMIT_NPROC)
    code = """
import os, time
forks = 0
try:
    for _ in range(10_000):
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        forks += 1
except OSError as e:
    print("stopped after", forks, type(e).__name__)
"""
    result = sandbox.run(SandboxRequest(code=SAY_NAMESPACE + code))
    assert result.status == "ok", result.error
    last = result.stdout.splitlines()[-1]
    assert last.endswith("BlockingIOError")
    assert int(last.split()[2]) < sandbox.limits.processes
    _nothing_left(result.stdout)  # the sleeping children too
    # The true bomb: every process forks forever; it ends at the deadline at the latest.
    bomb = BubblewrapExecutor(limits=SandboxLimits(wall_seconds=5, processes=16), policy=False)
    code = SAY_NAMESPACE + "while True:\n    os.fork()\n"
    result = bomb.run(SandboxRequest(code=code))
    assert result.status in {"error", "timeout"}
    _nothing_left(result.stdout)
    assert resource.getrlimit(resource.RLIMIT_NPROC) == limit  # the worker's own are untouched
    after = sandbox.run(SandboxRequest(code="print('still here')"))  # the machine still forks
    assert after.stdout == "still here\n"


def test_a_memory_hog_is_stopped(sandbox: BubblewrapExecutor) -> None:
    at_once = sandbox.run(SandboxRequest(code="x = bytearray(4 * 1024**3)"))
    assert at_once.status == "memory_limit"
    assert "MemoryError" in at_once.error
    assert "768 MB" in at_once.error
    code = "import numpy as np\nkeep = []\nwhile True:\n    keep.append(np.ones(10**7))\n"
    growing = sandbox.run(SandboxRequest(code=code))
    assert growing.status == "memory_limit"


def test_a_cpu_hog_is_stopped_at_its_cpu_limit(sandbox: BubblewrapExecutor) -> None:
    result = sandbox.run(SandboxRequest(code=SAY_NAMESPACE + "while True:\n    pass\n"))
    assert result.status == "cpu_limit"
    assert result.error == "killed at its CPU limit of 3 s"
    assert result.cpu_seconds >= 3
    _nothing_left(result.stdout)


def test_an_idle_infinite_loop_is_killed_at_the_deadline() -> None:
    sandbox = BubblewrapExecutor(limits=SandboxLimits(wall_seconds=2), policy=False)
    if sandbox.unavailable():
        pytest.skip(f"no bubblewrap sandbox on this machine: {sandbox.unavailable()}")
    code = "import time\nprint('started', flush=True)\nwhile True:\n    time.sleep(1)\n"
    result = sandbox.run(SandboxRequest(code=SAY_NAMESPACE + code))
    assert result.status == "timeout"
    assert result.error == "killed at the wall-clock deadline of 2 s"
    assert result.stdout.endswith("]\nstarted\n")  # what it printed before is kept
    _nothing_left(result.stdout)


def test_endless_output_is_cut(sandbox: BubblewrapExecutor) -> None:
    code = SAY_NAMESPACE + "while True:\n    print('x' * 1000)\n"
    result = sandbox.run(SandboxRequest(code=code))
    assert result.status == "output_limit"
    assert result.stdout_truncated
    assert len(result.stdout) == sandbox.limits.stdout_bytes
    _nothing_left(result.stdout)


SUBCLASSES_ESCAPE = """
system = next(
    c for c in ().__class__.__bases__[0].__subclasses__() if c.__name__ == "_wrap_close"
).__init__.__globals__["system"]
print("shadow", system("cat /etc/shadow > /dev/null 2>&1"))
print("write", system("echo pwned > /usr/pwned 2>/dev/null"))
"""


def test_a_subclasses_escape_is_blocked_by_the_policy_and_harmless_without_it(
    sandbox: BubblewrapExecutor,
) -> None:
    assert any("'__subclasses__'" in str(v) for v in check(SUBCLASSES_ESCAPE))
    guarded = BubblewrapExecutor(limits=sandbox.limits)  # the policy on, as in production
    refused = guarded.run(SandboxRequest(code=SUBCLASSES_ESCAPE))
    assert refused.status == "policy"
    assert "__subclasses__" in refused.error
    # Without the policy the escape reaches os.system: the shell it starts is in the sandbox too.
    escaped = sandbox.run(SandboxRequest(code=SUBCLASSES_ESCAPE))
    assert escaped.status == "ok", escaped.error
    assert "shadow 0" not in escaped.stdout
    assert "write 0" not in escaped.stdout
    assert not Path("/usr/pwned").exists()
