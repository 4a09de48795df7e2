"""What a process's memory holds, written on request: a debugging aid, off by default.

With ``AGENTDESK_MEMORY_DUMP_DIR`` set, a process (web, worker, beat) writes on each ``SIGUSR2``
``<pid>-<n>.json`` into that folder: its resident memory and threads, the garbage collector's
objects counted by type, Python's small-object allocator's arenas and glibc's ``malloc_info``
(each malloc arena's size and free bytes).
The first dump also starts tracemalloc (unless ``PYTHONTRACEMALLOC`` started it with the
process), and each later one writes a snapshot beside it (``<pid>-<n>.tracemalloc``): what was
allocated since the first dump and is still held, by traceback. Dump once after warm-up and
again later: ``python -m bench.soak.memory`` compares two dumps and tells a leak (more objects,
held from the same tracebacks) from memory that the allocator keeps. ``bench.soak
--memory-dumps`` sets the variable and signals the web process (bench/README.md "Soak").
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import itertools
import json
import os
import signal
import sys
import tempfile
import threading
import time
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Any

VARIABLE = "AGENTDESK_MEMORY_DUMP_DIR"
FRAMES = 12  # per traceback: from the allocation up to the view, middleware or consumer
_numbers = itertools.count(1)


def install() -> bool:
    """Dump on SIGUSR2 when the variable names a folder (only the main thread sets handlers)."""
    folder = os.environ.get(VARIABLE)
    if not folder or threading.current_thread() is not threading.main_thread():
        return False
    signal.signal(signal.SIGUSR2, functools.partial(_on_signal, Path(folder)))
    return True


def _on_signal(folder: Path, signum: int, frame: object) -> None:
    dump(folder)


def dump(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    base = folder / f"{os.getpid()}-{next(_numbers):03d}"
    gc.collect()
    kinds = Counter(f"{type(o).__module__}.{type(o).__qualname__}" for o in gc.get_objects())
    facts: dict[str, Any] = {
        "pid": os.getpid(),
        "time": time.time(),
        "status": _status(),
        "gc_objects": sum(kinds.values()),
        "types": dict(kinds.most_common(300)),
        "malloc_info": _malloc_info(),
        "pymalloc": _pymalloc(),
    }
    if tracemalloc.is_tracing():
        traced, peak = tracemalloc.get_traced_memory()
        facts["tracemalloc"] = {
            "traced": traced,
            "peak": peak,
            "overhead": tracemalloc.get_tracemalloc_memory(),
        }
        tracemalloc.take_snapshot().dump(str(base.with_suffix(".tracemalloc")))
    path = base.with_suffix(".json")
    path.write_text(json.dumps(facts, indent=1))
    if not tracemalloc.is_tracing():
        tracemalloc.start(FRAMES)  # from here on: the next dumps say what is new and still held
    return path


def _status() -> dict[str, str]:
    try:
        lines = Path("/proc/self/status").read_text().splitlines()
    except OSError:
        return {}
    wanted = ("VmRSS", "RssAnon", "RssFile", "VmHWM", "Threads")
    return {k: v.strip() for k, _, v in (line.partition(":") for line in lines) if k in wanted}


def _pymalloc() -> dict[str, int]:
    """Python's small-object allocator: its arenas, and the bytes in blocks in use and free in
    them (``sys._debugmallocstats`` writes to the C stderr: caught in a file meanwhile, with
    whatever another thread writes there in that moment)."""
    with tempfile.TemporaryFile() as caught:
        sys.stderr.flush()
        stderr = os.dup(2)
        os.dup2(caught.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(stderr, 2)
            os.close(stderr)
        caught.seek(0)
        text = caught.read().decode(errors="replace")
    found = (line.partition("=") for line in text.splitlines() if line.startswith("# "))
    return {k[2:].strip(): int(v.replace(",", "")) for k, _, v in found if v.strip()[:1].isdigit()}


def _malloc_info() -> str:
    """glibc's XML report of its arenas, or "" under another C library."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        info, open_stream, close = libc.malloc_info, libc.open_memstream, libc.fclose
    except (OSError, AttributeError, TypeError):
        return ""
    buffer, size = ctypes.c_char_p(), ctypes.c_size_t()
    open_stream.restype = ctypes.c_void_p
    close.argtypes = [ctypes.c_void_p]
    info.argtypes = [ctypes.c_int, ctypes.c_void_p]
    stream = open_stream(ctypes.byref(buffer), ctypes.byref(size))
    if not stream:
        return ""
    info(0, stream)
    close(stream)
    text = ctypes.string_at(buffer, size.value).decode()
    libc.free(buffer)
    return text
