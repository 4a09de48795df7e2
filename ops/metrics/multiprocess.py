"""prometheus-client's multiprocess mode for the platform's processes (web, every worker
process, beat): each process writes its samples to files of its own in one shared directory, and
``GET /metrics`` in any web process serves the sum over all of them.

The client library's rules (https://prometheus.github.io/client_python/multiprocess/), and how
they are kept here:

- The directory is set before any sample is recorded: :func:`configure` runs when the metric
  definitions are first imported, sets ``PROMETHEUS_MULTIPROC_DIR`` from the settings and
  installs the multiprocess value class explicitly (whatever imported the library first).
- It is emptied between runs of the platform, "before startup": ``manage.py up`` calls
  :func:`reset` before it starts web, worker and beat (the files of processes that are gone; a
  running process's are never pulled from under it). Counters of a process that died while the
  others live are kept (their runs still count; dropping them would make the totals go down,
  which Prometheus reads as a counter reset and turns into a false spike).
- A process that ends gives its live gauges back (``mark_process_dead``): at exit (atexit, and
  Celery's worker signals for pool processes, which leave without running atexit); a process
  killed outright is swept by the next process that starts on the same host.

Files are named by host and pid (``counter_<host>-<pid>.db``) rather than pid alone: containers
that share the directory through a volume each have their own pid 1.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import socket
from pathlib import Path

import psutil
from django.conf import settings
from prometheus_client import multiprocess, values

# "_" separates the parts of a file name (the library splits on it): never in the identifier.
_HOST = re.sub(r"[^A-Za-z0-9.-]", "-", socket.gethostname()) or "host"
_FILE = re.compile(r"^(?P<kind>[a-z]+(?:_[a-z]+)?)_(?P<host>[A-Za-z0-9.-]+)-(?P<pid>\d+)\.db$")
_configured_pid = 0


def process_identifier() -> str:
    """This process's name in the directory (called on every sample: kept cheap)."""
    return f"{_HOST}-{os.getpid()}"


def directory() -> Path:
    return Path(settings.PROMETHEUS_MULTIPROC_DIR)


def configure() -> None:
    """Make this process write its samples to the shared directory. Idempotent per process."""
    global _configured_pid  # noqa: PLW0603 - once per process (a forked child configures again)
    if _configured_pid == os.getpid():
        return
    path = directory()
    path.mkdir(parents=True, exist_ok=True)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(path)  # read by each value when it is created
    values.ValueClass = values.MultiProcessValue(process_identifier)
    # A process that had this pid before (a restarted container's pid 1) may have left live
    # gauges: this one starts its own at zero. (Its counters go on from where they were: the
    # totals stay monotonic.)
    mark_dead()
    sweep_dead_processes(path)
    if not _configured_pid:
        atexit.register(mark_dead)
    _configured_pid = os.getpid()


def mark_dead(pid: int | None = None) -> None:
    """Give a process's live gauges back (this process's when ``pid`` is ``None``)."""
    identifier = process_identifier() if pid is None else f"{_HOST}-{pid}"
    with contextlib.suppress(OSError):  # the directory may be gone already (a reset, a test)
        multiprocess.mark_process_dead(identifier, str(directory()))


def sweep_dead_processes(path: Path) -> None:
    """Live gauges of processes of this host that are gone (killed, not stopped) are removed;
    their counters and histograms stay in the totals."""
    for name in os.listdir(path):
        match = _FILE.match(name)
        if match is None or match["host"] != _HOST or not match["kind"].startswith("gauge_live"):
            continue
        pid = int(match["pid"])
        if pid != os.getpid() and not psutil.pid_exists(pid):
            with contextlib.suppress(FileNotFoundError):  # another process swept it first
                os.remove(path / name)


def reset(path: Path | None = None) -> Path:
    """Before a platform starts (``manage.py up``, before its children): the samples of this
    host's processes that are gone — the platform's last run — are removed, counters included,
    so the new run counts from zero. A process still running that writes there (another tool
    sharing the directory) keeps its files."""
    path = path or directory()
    path.mkdir(parents=True, exist_ok=True)
    for name in os.listdir(path):
        match = _FILE.match(name)
        if match is None or match["host"] != _HOST:
            continue
        pid = int(match["pid"])
        if pid != os.getpid() and not psutil.pid_exists(pid):
            with contextlib.suppress(FileNotFoundError):
                os.remove(path / name)
    return path
