"""Log lines that request input cannot forge: control characters are escaped.

A value from a request (a path, a header, a field name in a body, an exception message that
quotes one) may hold a newline, a carriage return, a NUL or a terminal escape sequence. Written
raw, it starts a fake log line or corrupts the terminal and the log shipper. The formatter of
``LOGGING`` (settings) writes each record's message with such characters escaped the way Python
writes them (``\\n``, ``\\x00``, ``\\x1b``...), and does the same for the message of a logged
exception; only the traceback's own line breaks stay.
"""

from __future__ import annotations

import logging
import re
import traceback
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
