"""Log lines that request input cannot forge: control characters are escaped.

A value from a request (a path, a header, a field name in a body, an exception message that
quotes one) may hold a newline, a carriage return, a NUL or a terminal escape sequence. Written
raw, it starts a fake log line or corrupts the terminal and the log shipper. The formatter of
``LOGGING`` (settings) writes each record's message with such characters escaped the way Python
writes them (``\\n``, ``\\x00``, ``\\x1b``...), and does the same for the message of a logged
exception; only the traceback's own line breaks stay.

:class:`QuietHousekeeping` drops the INFO lines Celery writes for each of beat's fixed tasks (the
lease reaper runs every 10 seconds: "received", "succeeded", beat's "Sending due task"); their
failures and every other task's lines still show.
"""

from __future__ import annotations

import logging
import re
import traceback
from collections.abc import Iterable, Mapping
from types import TracebackType

# C0 controls but the tab, DEL, C1 controls, and the Unicode line and paragraph separators.
_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")


def escape_control(text: str) -> str:
    """``text`` with control characters written as escapes (``"a\\nb"`` for a newline)."""
    if not _CONTROL.search(text):
        return text
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def _escape_exception_messages(te: traceback.TracebackException, seen: set[int]) -> None:
    if id(te) in seen:
        return
    seen.add(id(te))
    # The exception's message as formatted (a private attribute of TracebackException since
    # Python 3.10, still in 3.13); left alone if a later version renames it.
    message = getattr(te, "_str", None)
    if isinstance(message, str):
        te._str = escape_control(message)  # type: ignore[attr-defined]
    notes = getattr(te, "__notes__", None)
    if isinstance(notes, list):
        te.__notes__ = [escape_control(str(n)) for n in notes]
    for nested in (te.__cause__, te.__context__, *(getattr(te, "exceptions", None) or [])):
        if nested is not None:
            _escape_exception_messages(nested, seen)


class EscapingFormatter(logging.Formatter):
    """A :class:`logging.Formatter` whose messages and exception messages are escaped."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = escape_control(record.message)
        return super().formatMessage(record)

    def formatException(
        self,
        ei: tuple[type[BaseException], BaseException, TracebackType | None]
        | tuple[None, None, None],
    ) -> str:
        if ei[1] is None:
            return super().formatException(ei)
        te = traceback.TracebackException(type(ei[1]), ei[1], ei[2])
        _escape_exception_messages(te, set())
        return "".join(te.format()).rstrip("\n")


# Celery's per-task INFO lines: the worker's "received" / "succeeded" (the task's name in the
# record's ``data``) and beat's "Sending due task <entry> (<task>)".
_TASK_LINES = frozenset({"celery.worker.strategy", "celery.app.trace"})
_BEAT = "celery.beat"


class QuietHousekeeping(logging.Filter):
    """Drops the INFO lines of Celery about ``tasks`` (beat's fixed entries, ``LOGGING``)."""

    def __init__(self, tasks: Iterable[str] = ()) -> None:
        super().__init__()
        self.tasks = frozenset(tasks)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.INFO:
            return True
        if record.name in _TASK_LINES:
            data = getattr(record, "data", None)
            return not (isinstance(data, Mapping) and data.get("name") in self.tasks)
        if record.name == _BEAT and isinstance(record.args, tuple) and len(record.args) == 2:
            return record.args[1] not in self.tasks
        return True
