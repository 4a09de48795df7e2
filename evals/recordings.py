"""The recordings of the experiment runs this process is running, by execution id: put here by
the run plugin when a delivery of an experiment run starts (evals/run_plugin.py), read by the
tool gate for each of its calls (evals/tool_gate.py). A run that is not an experiment's is never
here, so the gate answers it with a dictionary lookup and no query.

Bounded: an entry whose run ended elsewhere (a cancel through the API) is dropped when newer runs
push it out; a later delivery of that run puts it back."""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict

from evals.matching import RecordedCall

MAX_RUNS = 4096

_lock = threading.Lock()
_runs: OrderedDict[uuid.UUID, dict[tuple[str, str], RecordedCall]] = OrderedDict()


def put(execution_id: uuid.UUID, recording: dict[tuple[str, str], RecordedCall]) -> None:
    with _lock:
        _runs[execution_id] = recording
        _runs.move_to_end(execution_id)
        while len(_runs) > MAX_RUNS:
            _runs.popitem(last=False)


def get(execution_id: uuid.UUID) -> dict[tuple[str, str], RecordedCall] | None:
    return _runs.get(execution_id)


def drop(execution_id: uuid.UUID) -> None:
    with _lock:
        _runs.pop(execution_id, None)
