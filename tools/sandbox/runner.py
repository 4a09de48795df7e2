"""The program that runs INSIDE the sandbox (``python -I /sandbox/runner.py``), standard library
only: it is not imported by the web or worker processes.

It reads the job (JSON) from stdin, drops root if it has it (bubblewrap started by root keeps
CAP_SETUID/CAP_SETGID for this one step: the script must not run as root, or RLIMIT_NPROC would not
hold), sets the resource limits, runs the script, and writes what the script left (the ``result``
table or value, open matplotlib figures as PNG) as JSON to the result pipe. The script's prints go
to stdout, which the executor reads and truncates. pandas and matplotlib are imported only if the
script imported them.
"""

import base64
import io
import json
import math
import os
import resource
import sys
import traceback
from typing import Any

MIB = 1024 * 1024


def _drop_root(uid: int, gid: int) -> None:
    if os.getuid() != 0:
        return
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)  # all capabilities go with it


def _limit(limits: dict[str, Any]) -> None:
    cpu = int(limits["cpu_seconds"])
    # The soft limit sends SIGXCPU, which ends the process; the hard one SIGKILLs a handler.
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    memory = int(limits["memory_mb"]) * MIB
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_NPROC, (limits["processes"], limits["processes"]))
    scratch = int(limits["scratch_mb"]) * MIB
    resource.setrlimit(resource.RLIMIT_FSIZE, (scratch, scratch))
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _cell(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if hasattr(value, "item"):  # numpy scalars
        return _cell(value.item())
    return str(value)


def _table(result: Any, max_rows: int) -> dict[str, Any] | None:
    pandas = sys.modules.get("pandas")
    if pandas is not None and isinstance(result, pandas.Series):
        result = result.to_frame()
    if pandas is not None and isinstance(result, pandas.DataFrame):
        frame = result.reset_index() if not isinstance(result.index, pandas.RangeIndex) else result
        head = frame.head(max_rows)
        return {
            "columns": [str(c) for c in head.columns],
            "rows": [[_cell(v) for v in row] for row in head.itertuples(index=False, name=None)],
            "row_count": len(frame),
        }
    if isinstance(result, list) and result and all(isinstance(r, dict) for r in result):
        columns = list(dict.fromkeys(k for r in result for k in r))
        rows = [[_cell(r.get(c)) for c in columns] for r in result[:max_rows]]
        return {"columns": [str(c) for c in columns], "rows": rows, "row_count": len(result)}
    return None


def _charts(max_charts: int) -> list[str]:
    if "matplotlib.pyplot" not in sys.modules:
        return []
    pyplot = sys.modules["matplotlib.pyplot"]
    charts = []
    for number in pyplot.get_fignums()[:max_charts]:
        buffer = io.BytesIO()
        pyplot.figure(number).savefig(buffer, format="png", dpi=100, bbox_inches="tight")
        charts.append(base64.b64encode(buffer.getvalue()).decode())
    return charts


class _CappedLog(io.TextIOBase):
    """A pod's stdout and stderr (its log, read back whole): the first ``cap`` characters are
    written, the rest counted; far past it the script is only printing and is stopped with an
    ``output_limit`` report, as bubblewrap's executor stops it."""

    def __init__(self, stream: Any, cap: int, report: Any) -> None:
        self.stream, self.cap, self.seen, self.report = stream, cap, 0, report

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        room = self.cap - self.seen
        self.seen += len(text)
        if room > 0:
            self.stream.write(text[:room])
        if self.seen > 10 * self.cap:
            self.report({"error": "", "memory": False, "output_limit": True})
            os._exit(1)
        return len(text)

    def flush(self) -> None:
        self.stream.flush()


def _error(exc: BaseException) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == "<script>"]
    where = "".join(traceback.format_list(frames[-3:]))
    text = "".join(traceback.format_exception_only(exc)).strip()
    return f"{where}{text}" if where else text


def main() -> None:
    # The job comes on stdin (bubblewrap) or as a mounted file (a Kubernetes Job's ConfigMap).
    if len(sys.argv) > 1:
        with open(sys.argv[1]) as job_file:
            job = json.load(job_file)
    else:
        job = json.loads(sys.stdin.read())
    sys.stdin.close()
    _drop_root(job["uid"], job["gid"])
    limits = job["limits"]
    _limit(limits)
    log = None
    if "result_fd" not in job:  # a pod: its stdout and stderr are its log, and carry the result
        real = sys.stdout

        def report_now(report: dict[str, Any]) -> None:
            real.write(f"\n{job['result_marker']}\n{json.dumps(report)}\n")
            real.flush()

        log = _CappedLog(real, int(limits["stdout_bytes"]), report_now)
        sys.stdout = sys.stderr = log
    namespace: dict[str, Any] = {"__name__": "__main__"}
    runner = os.getpid()
    report: dict[str, Any] = {"error": "", "memory": False}
    try:
        exec(compile(job["code"], "<script>", "exec"), namespace)  # noqa: S102 - the sandbox's purpose
    except MemoryError as exc:
        report |= {"error": _error(exc) or "MemoryError", "memory": True}
    except BaseException as exc:
        report["error"] = _error(exc)
    sys.stdout.flush()
    if os.getpid() != runner:  # a process the script forked: only the runner reports
        os._exit(1)
    try:
        report["table"] = _table(namespace.get("result"), int(limits["table_rows"]))
        if report["table"] is None and namespace.get("result") is not None:
            report["value"] = repr(namespace["result"])[:2000]
        report["charts"] = _charts(int(limits["charts"]))
    except MemoryError:
        report |= {"error": "MemoryError while reading the result", "memory": True}
    except Exception as exc:
        report["error"] = report["error"] or f"the result could not be read: {_error(exc)}"
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    report["cpu_seconds"] = own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
    if "result_fd" in job:
        with os.fdopen(job["result_fd"], "w") as out:
            json.dump(report, out)
    else:  # a pod has only its log: the result follows a marker (a forgery spoils only its own)
        assert log is not None  # set above in this mode
        report["stdout_seen"] = log.seen
        log.report(report)


if __name__ == "__main__":
    main()
