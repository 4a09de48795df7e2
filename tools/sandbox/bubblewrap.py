"""The bubblewrap executor: one ``bwrap`` process per script, on this machine.

The sandbox sees a root of its own: /usr (and the /bin, /lib symlinks) and the Python interpreter
read-only, the request's files read-only under /data, a size-capped tmpfs at /tmp (the scratch, its
working directory), a /proc of its own pid namespace and a minimal /dev; no /etc, no project files,
no environment of the worker. It has no network (a namespace with only a loopback that is down),
no IPC, its own pid namespace, and dies with its parent. The runner inside drops root and sets the
limits (CPU seconds, address space, processes, file size); the executor enforces the wall-clock
deadline and the output cap by killing the whole sandbox (its process group; the pid namespace
takes everything in it along).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from tools.sandbox.base import (
    DATA_DIR,
    SCRATCH_DIR,
    SandboxError,
    SandboxLimits,
    SandboxRequest,
    SandboxResult,
    Status,
)
from tools.sandbox.policy import PolicyViolation, enforce
from tools.sandbox.report import from_report

RUNNER = Path(__file__).with_name("runner.py")
RUNNER_IN_SANDBOX = "/sandbox/runner.py"
MATPLOTLIB_DIR = f"{SCRATCH_DIR}/.matplotlib"
NOBODY = 65534
_READ = 65536


def _namespaces() -> list[str]:
    spaces = ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts"]
    spaces.append("--unshare-cgroup-try")
    # Root keeps CAP_SETUID/CAP_SETGID only for the runner to drop to an unprivileged user: as
    # root RLIMIT_NPROC does not apply. Anyone else needs a user namespace to make the others.
    if os.geteuid() == 0:
        return [*spaces, "--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    return [*spaces, "--unshare-user", "--disable-userns"]


def _parents(path: str) -> list[str]:
    """``--dir`` for each missing parent of a mount point, world-traversable (bubblewrap makes
    them 0700 otherwise, and the runner is not root once it starts the script)."""
    parts = Path(path).parts[1:-1]
    args: list[str] = []
    for i in range(len(parts)):
        args += ["--perms", "0755", "--dir", "/" + "/".join(parts[: i + 1])]
    return args


@functools.cache
def _font_list(python: str) -> tuple[str, bytes] | None:
    """matplotlib's font list (its file name and bytes), built once per process by a child of its
    own: without it every chart pays the ~1 s scan again in its fresh scratch."""
    with tempfile.TemporaryDirectory() as folder:
        env = {"MPLCONFIGDIR": folder, "HOME": folder, "PATH": "/usr/bin:/bin"}
        code = "import matplotlib.font_manager"
        done = subprocess.run(
            [python, "-I", "-c", code], env=env, capture_output=True, check=False, timeout=120
        )
        found = sorted(Path(folder).glob("fontlist-*.json"))
        if done.returncode != 0 or not found:
            return None
        return found[0].name, found[0].read_bytes()


class BubblewrapExecutor:
    def __init__(
        self,
        *,
        limits: SandboxLimits | None = None,
        python: str | None = None,
        bwrap: str = "bwrap",
        policy: bool = True,
        uid: int = NOBODY,
    ) -> None:
        self.limits = limits or SandboxLimits()
        # The interpreter the script runs on: this venv's (pandas, numpy, matplotlib are in it).
        self.python = python or sys.executable
        self.bwrap = bwrap
        self.policy = policy  # off only in tests that show the sandbox holds without it
        self.uid = uid

    def unavailable(self) -> str:
        """Why this machine cannot run the sandbox, or "" when it can (a tiny one is started)."""
        path = shutil.which(self.bwrap)
        if path is None:
            return "bubblewrap is not installed (Debian: apt-get install bubblewrap)"
        probe = [path, *_namespaces(), "--tmpfs", SCRATCH_DIR, *self._mounts()]
        probe += [self.python, "-I", "-c", "pass"]
        done = subprocess.run(probe, capture_output=True, text=True, check=False, timeout=60)
        if done.returncode != 0:
            return f"bubblewrap cannot make its sandbox here: {done.stderr.strip()}"
        return ""

    def _mounts(self) -> list[str]:
        # Fonts' configuration only (matplotlib asks fontconfig); nothing else of /etc.
        args = ["--ro-bind", "/usr", "/usr", "--ro-bind-try", "/etc/fonts", "/etc/fonts"]
        for link in ("bin", "lib", "lib64", "sbin"):
            if Path(f"/{link}").is_symlink():
                args += ["--symlink", os.readlink(f"/{link}"), f"/{link}"]
            elif Path(f"/{link}").is_dir():
                args += ["--ro-bind", f"/{link}", f"/{link}"]
        prefixes = {sys.prefix, sys.base_prefix, os.path.realpath(sys.base_prefix)}
        for prefix in sorted(p for p in prefixes if not p.startswith("/usr/")):
            args += [*_parents(prefix), "--ro-bind", prefix, prefix]
        return args

    def font_list_fd(self, request: SandboxRequest) -> tuple[str, int] | None:
        """A file descriptor of matplotlib's font list for a script that draws, else None."""
        fonts = _font_list(self.python) if "matplotlib" in request.code else None
        if fonts is None:
            return None
        fd = os.memfd_create("fontlist", os.MFD_CLOEXEC)
        os.write(fd, fonts[1])
        os.lseek(fd, 0, os.SEEK_SET)
        return fonts[0], fd

    def argv(
        self, request: SandboxRequest, runner_fd: int, fonts: tuple[str, int] | None = None
    ) -> list[str]:
        limits = self.limits
        scratch = str(limits.scratch_mb * 1024 * 1024)
        args = [self.bwrap, *_namespaces(), "--die-with-parent", "--new-session"]
        # The scratch first: an interpreter whose prefix lies under it (a venv in /tmp) is
        # bound on top of the tmpfs, not hidden by it.
        args += ["--perms", "1777", "--size", scratch, "--tmpfs", SCRATCH_DIR]
        args += self._mounts()
        args += ["--proc", "/proc", "--dev", "/dev"]
        if fonts is not None:
            args += ["--perms", "1777", "--dir", MATPLOTLIB_DIR]
            args += ["--perms", "0444", "--file", str(fonts[1]), f"{MATPLOTLIB_DIR}/{fonts[0]}"]
        args += ["--perms", "0755", "--dir", DATA_DIR]
        for name, path in sorted(request.files.items()):
            args += ["--ro-bind", str(path), f"{DATA_DIR}/{name}"]
        args += ["--perms", "0755", "--dir", "/sandbox"]
        args += ["--perms", "0444", "--ro-bind-data", str(runner_fd), RUNNER_IN_SANDBOX]
        args += ["--remount-ro", "/", "--chdir", SCRATCH_DIR]
        return [*args, self.python, "-I", RUNNER_IN_SANDBOX]

    def run(self, request: SandboxRequest) -> SandboxResult:
        if self.policy:
            try:
                enforce(request.code, max_bytes=self.limits.code_bytes)
            except PolicyViolation as refused:
                return SandboxResult(status="policy", error=str(refused))
        for path in request.files.values():
            if not Path(path).is_file():
                raise SandboxError(f"no such data file: {path}")
        if shutil.which(self.bwrap) is None:
            raise SandboxError("bubblewrap is not installed (Debian: apt-get install bubblewrap)")
        return _Run(self, request).run()


def _cpu_of_descendants(pid: int) -> float:
    try:
        processes = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return 0.0
    total = 0.0
    for process in processes:
        with contextlib.suppress(psutil.Error):
            times = process.cpu_times()
            total += times.user + times.system
    return total


class _Run:
    """One script's process and its pipes, from start to reaped."""

    def __init__(self, executor: BubblewrapExecutor, request: SandboxRequest) -> None:
        self.limits = executor.limits
        self.executor = executor
        self.request = request
        self.stdout = bytearray()
        self.stdout_seen = 0
        self.stderr = bytearray()
        self.result = bytearray()
        self.overrun: Status | None = None
        self.killed_cpu = 0.0

    def run(self) -> SandboxResult:
        runner_fd = os.open(RUNNER, os.O_RDONLY | os.O_CLOEXEC)
        fonts = self.executor.font_list_fd(self.request)
        passed = (runner_fd, *([fonts[1]] if fonts else []))
        result_r, result_w = os.pipe()
        started = time.monotonic()
        try:
            job = {
                "code": self.request.code,
                "limits": self.limits.__dict__,
                "uid": self.executor.uid,
                "gid": self.executor.uid,
                "result_fd": result_w,
            }
            env = {
                "PATH": "/usr/bin:/bin",
                "HOME": SCRATCH_DIR,
                "LANG": "C.UTF-8",
                "MPLBACKEND": "Agg",
                "MPLCONFIGDIR": MATPLOTLIB_DIR,
                "OPENBLAS_NUM_THREADS": "1",
                "OMP_NUM_THREADS": "1",
                "PYTHONDONTWRITEBYTECODE": "1",
            }
            process = subprocess.Popen(
                self.executor.argv(self.request, runner_fd, fonts),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(*passed, result_w),
                env=env,
                start_new_session=True,  # its own process group: killed as one
            )
        finally:
            for fd in (*passed, result_w):
                os.close(fd)
        try:
            self._pump(process, json.dumps(job).encode(), result_r, started)
        finally:
            os.close(result_r)
            _, status, usage = os.wait4(process.pid, 0)
            process.returncode = os.waitstatus_to_exitcode(status)
        # bwrap's monitor does not reap the sandbox's init, so its rusage lacks the script: the
        # runner reports its own (and its children's); a killed sandbox is read before the kill.
        cpu = usage.ru_utime + usage.ru_stime + self.killed_cpu
        return self._result(process.returncode, cpu, time.monotonic() - started)

    def _pump(self, process: subprocess.Popen[bytes], job: bytes, result_r: int, t0: float) -> None:
        assert process.stdin and process.stdout and process.stderr  # noqa: PT018 - pipes asked for
        try:
            process.stdin.write(job)
            process.stdin.close()
        except BrokenPipeError:
            pass  # the sandbox did not start: its stderr says why
        deadline = t0 + self.limits.wall_seconds
        sinks = {
            process.stdout.fileno(): self._out,
            process.stderr.fileno(): self._err,
            result_r: self._res,
        }
        with selectors.DefaultSelector() as selector:
            for fd in sinks:
                selector.register(fd, selectors.EVENT_READ)
            while selector.get_map() and self.overrun is None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self.overrun = "timeout"
                    break
                for key, _ in selector.select(remaining):
                    chunk = os.read(key.fd, _READ)
                    if chunk:
                        sinks[key.fd](chunk)
                    else:
                        selector.unregister(key.fd)
        if self.overrun is not None:
            self.killed_cpu = _cpu_of_descendants(process.pid)
            os.killpg(process.pid, signal.SIGKILL)
        process.stdout.close()
        process.stderr.close()

    def _out(self, chunk: bytes) -> None:
        self.stdout_seen += len(chunk)
        room = self.limits.stdout_bytes - len(self.stdout)
        self.stdout += chunk[: max(room, 0)]
        # Past ten times the cap the script is only printing: stop it rather than drain forever.
        if self.stdout_seen > 10 * self.limits.stdout_bytes:
            self.overrun = "output_limit"

    def _err(self, chunk: bytes) -> None:
        self.stderr = (self.stderr + chunk)[-8192:]

    def _res(self, chunk: bytes) -> None:
        self.result += chunk
        if len(self.result) > self.limits.result_bytes:
            self.overrun = "output_limit"

    def _result(self, code: int, cpu: float, wall: float) -> SandboxResult:
        common: dict[str, Any] = {
            "stdout": self.stdout.decode(errors="replace"),
            "stdout_truncated": self.stdout_seen > len(self.stdout),
            "stderr": self.stderr.decode(errors="replace"),
            "cpu_seconds": round(cpu, 3),  # the runner's figure replaces it when it has one
            "wall_seconds": round(wall, 3),
        }
        limits = self.limits
        if self.overrun == "timeout":
            error = f"killed at the wall-clock deadline of {limits.wall_seconds:g} s"
            return SandboxResult(status="timeout", error=error, **common)
        if self.overrun == "output_limit":
            error = "killed: the script wrote more output than the sandbox keeps"
            return SandboxResult(status="output_limit", error=error, **common)
        if code in (-signal.SIGXCPU, 128 + signal.SIGXCPU) or (
            code in (-signal.SIGKILL, 128 + signal.SIGKILL) and cpu >= limits.cpu_seconds
        ):
            error = f"killed at its CPU limit of {limits.cpu_seconds} s"
            common["cpu_seconds"] = max(common["cpu_seconds"], float(limits.cpu_seconds))
            return SandboxResult(status="cpu_limit", error=error, **common)
        try:
            report = json.loads(self.result)
        except ValueError:
            error = f"the sandbox ended without a result (exit status {code})"
            return SandboxResult(status="crashed", error=error, **common)
        return from_report(report, limits=limits, **common)
