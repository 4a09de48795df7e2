"""The HTTP clients under the LLM SDKs do not log each request at the default levels; request
input in a log line (a message, a logged exception's message) cannot forge another line."""

from __future__ import annotations

import io
import logging
from collections.abc import Callable

import pytest
from celery import beat
from celery.app import trace

from core.api.exceptions import exception_handler
from core.log_filters import EscapingFormatter, escape_control
from ops.log_context import RunContextFilter


@pytest.mark.parametrize("name", ["httpx", "httpx2", "httpcore", "httpcore2"])
def test_http_client_requests_are_not_logged_at_info(name: str) -> None:
    assert not logging.getLogger(name).isEnabledFor(logging.INFO)
    assert logging.getLogger(name).isEnabledFor(logging.WARNING)


# --- request input in log lines ----------------------------------------------------------------


def _console_formatter() -> logging.Formatter:
    handlers = [h for h in logging.getLogger().handlers if h.get_name() == "console"]
    assert handlers, "the root logger writes to the console handler of LOGGING"
    formatter = handlers[0].formatter
    assert isinstance(formatter, EscapingFormatter)
    return formatter


@pytest.mark.parametrize(
    ("raw", "escaped"),
    [
        ("a\nb", "a\\nb"),
        ("a\r\nb", "a\\r\\nb"),
        ("a\x00b", "a\\x00b"),
        ("\x1b[31mred", "\\x1b[31mred"),
        ("a\u2028b", "a\\u2028b"),
        ("tab\tstays", "tab\tstays"),
        ("caf\u00e9 \u2713", "caf\u00e9 \u2713"),
    ],
)
def test_control_characters_are_escaped(raw: str, escaped: str) -> None:
    assert escape_control(raw) == escaped


def test_a_request_value_in_a_message_stays_on_its_line() -> None:
    field = "name\nERROR forged line\x00"

    def emit() -> None:
        logging.getLogger("tests.logging").warning("unknown field %s", field)

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(_console_formatter())
    handler.addFilter(RunContextFilter())
    logger = logging.getLogger("tests.logging")
    logger.addHandler(handler)
    try:
        emit()
    finally:
        logger.removeHandler(handler)
    text = stream.getvalue()
    assert text.count("\n") == 1  # the record's own line end only
    assert "\x00" not in text
    assert "unknown field name\\nERROR forged line\\x00" in text


def test_a_request_value_in_a_logged_exception_cannot_forge_a_line() -> None:
    """An unexpected API error is logged with its traceback; its message may quote input."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(_console_formatter())
    handler.addFilter(RunContextFilter())
    logger = logging.getLogger("agentdesk.api")
    logger.addHandler(handler)
    try:
        try:
            try:
                raise ValueError("inner\nERROR forged inner")
            except ValueError as inner:
                raise KeyError("field\x00\nERROR forged") from inner
        except KeyError as exc:
            response = exception_handler(exc, {"view": None})
    finally:
        logger.removeHandler(handler)
    assert response.status_code == 500
    text = stream.getvalue()
    assert "\x00" not in text
    assert not any(line.startswith("ERROR forged") for line in text.splitlines())
    assert "field\\x00\\nERROR forged" in text
    assert "inner\\nERROR forged inner" in text
    # The traceback itself still reads as one.
    assert "Traceback (most recent call last):\n" in text
    assert "The above exception was the direct cause" in text


# --- beat's housekeeping tasks ------------------------------------------------------------------


def _through_console(emit: Callable[[], None]) -> str:
    """What the console handler of LOGGING (its formatter and filters) writes for ``emit``."""
    console = next(h for h in logging.getLogger().handlers if h.get_name() == "console")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(console.formatter)
    for each in console.filters:
        handler.addFilter(each)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        emit()
    finally:
        root.removeHandler(handler)
    return stream.getvalue()


def test_beats_housekeeping_tasks_log_no_line_per_run_but_their_failures_do() -> None:
    reaper = "agents.reap_expired_leases"  # every 10 s (CELERY_BEAT_SCHEDULE)

    def emit() -> None:
        for name in (reaper, "agents.run_execution"):
            context = {"id": "t-1", "name": name, "args": "()", "kwargs": "{}", "eta": None}
            # What the worker logs as it takes a task and as the task returns.
            logging.getLogger("celery.worker.strategy").info(
                trace.LOG_RECEIVED, context, extra={"data": context}
            )
            trace.info(trace.LOG_SUCCESS, {**context, "return_value": "0", "runtime": 0.01})
        beat.info("Scheduler: Sending due task %s (%s)", "reap-expired-leases", reaper)
        beat.info("Scheduler: Sending due task %s (%s)", "agent-tick", "agents.run_scheduled")
        failed = {"id": "t-2", "name": reaper, "exc": "OperationalError"}
        trace.logger.error(
            "Task %(name)s[%(id)s] raised unexpected: %(exc)s", failed, extra={"data": failed}
        )

    lines = _through_console(emit).splitlines()

    assert [line.split(": ", 1)[1] for line in lines if reaper in line] == [
        f"Task {reaper}[t-2] raised unexpected: OperationalError"
    ]
    other = [line for line in lines if "agents.run_execution" in line]
    assert len(other) == 2  # received, succeeded
    assert any("agents.run_scheduled" in line for line in lines)  # an agent's own schedule
