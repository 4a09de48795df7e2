"""Where the web process's memory goes over a soak: ``bench.soak --memory-dumps SECONDS`` starts
the platform with ops.memory_dump's hook on and signals the web process every ``SECONDS`` and at
the end; ``python -m bench.soak.memory A.json B.json`` compares two of its dumps (resident
memory, objects by type, glibc's malloc arenas, and what tracemalloc saw allocated since the
first dump and still held, by traceback).

tracemalloc, on from the first dump, costs memory of its own (reported, and part of the resident
figure) and CPU: a soak with dumps measures where memory goes, not how much the platform uses.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import threading
import tracemalloc
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from ops.memory_dump import FRAMES, VARIABLE


def environment(folder: Path) -> dict[str, str]:
    return {VARIABLE: str(folder)}


class Dumper:
    """Signals ``pid`` every ``every`` seconds and once more at :meth:`stop`."""

    def __init__(self, pid: int, every: float) -> None:
        self.pid, self.every = pid, every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="soak-dumper", daemon=True)

    def start(self) -> Dumper:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self._signal()

    def _signal(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGUSR2)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self._signal()


def arenas(xml: str) -> dict[str, float]:
    """glibc's arenas: how many, MB taken from the system, MB of it free (fast and other bins),
    and MB in blocks of their own (mmap)."""
    if not xml:
        return {}
    root = ET.fromstring(xml)
    heaps = root.findall("heap")
    system = sum(int(s.get("size", 0)) for h in heaps for s in h.findall("system[@type='current']"))
    free = sum(int(t.get("size", 0)) for h in heaps for t in h.findall("total"))
    mmap = next((int(t.get("size", 0)) for t in root.findall("total[@type='mmap']")), 0)
    mb = 2**20
    return {
        "arenas": len(heaps),
        "system_mb": round(system / mb, 1),
        "free_mb": round(free / mb, 1),
        "mmap_mb": round(mmap / mb, 1),
    }


def pymalloc(dump: dict[str, Any]) -> dict[str, float]:
    """Python's small-object arenas: how many (1 MiB each), MB in blocks in use and free."""
    stats, mb = dump.get("pymalloc", {}), 2**20
    return {
        "arenas": stats.get("arenas allocated current", 0),
        "in_use_mb": round(stats.get("bytes in allocated blocks", 0) / mb, 1),
        "free_mb": round(stats.get("bytes in available blocks", 0) / mb, 1),
    }


def compare(first: Path, second: Path, top: int = 15) -> str:
    a, b = json.loads(first.read_text()), json.loads(second.read_text())
    lines = [f"{first.name} -> {second.name}: {b['time'] - a['time']:.0f} s apart"]
    for key in ("VmRSS", "RssAnon", "Threads"):
        lines.append(f"  {key}: {a['status'].get(key)} -> {b['status'].get(key)}")
    lines.append(f"  gc objects: {a['gc_objects']:,} -> {b['gc_objects']:,}")
    grown = {t: b["types"].get(t, 0) - a["types"].get(t, 0) for t in {*a["types"], *b["types"]}}
    for name, diff in sorted(grown.items(), key=lambda kv: -abs(kv[1]))[:top]:
        lines.append(f"    {diff:+8,} {name} ({b['types'].get(name, 0):,})")
    lines.append(f"  malloc: {arenas(a['malloc_info'])} -> {arenas(b['malloc_info'])}")
    lines.append(f"  pymalloc: {pymalloc(a)} -> {pymalloc(b)}")
    if "tracemalloc" in b:
        lines += _traced(first, a, second, b, top)
    return "\n".join(lines)


def _traced(first: Path, a: dict[str, Any], second: Path, b: dict[str, Any], top: int) -> list[str]:
    """What tracemalloc holds at the second dump (all of it allocated since tracing started at
    the first dump, or more than at the first dump when it was already tracing), by traceback."""
    mb = 2**20
    figures = b["tracemalloc"]
    lines = [
        f"  tracemalloc: {figures['traced'] / mb:.1f} MB traced (allocated since tracing began "
        f"and still held), its own {figures['overhead'] / mb:.1f} MB"
    ]
    new = tracemalloc.Snapshot.load(str(second.with_suffix(".tracemalloc")))
    if "tracemalloc" in a:
        old = tracemalloc.Snapshot.load(str(first.with_suffix(".tracemalloc")))
        stats = new.compare_to(old, "traceback")
        rows = [(s.size_diff, s.count_diff, s.size, s.traceback) for s in stats]
    else:
        rows = [(s.size, s.count, s.size, s.traceback) for s in new.statistics("traceback")]
    for size, count, now, traceback in rows[:top]:
        lines.append(f"    {size / 1024:+9.1f} KiB {count:+7,} blocks (held: {now / 1024:.1f} KiB)")
        lines += [f"        {line}" for line in traceback.format(limit=FRAMES)[-8:]]
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.soak.memory", description=__doc__)
    parser.add_argument("first", type=Path)
    parser.add_argument("second", type=Path)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args(argv)
    print(compare(args.first, args.second, args.top))


if __name__ == "__main__":
    main()
