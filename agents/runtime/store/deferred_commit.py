"""A tool step's COMMIT left in flight (``step_transaction(commit_later=True)``, decision 0003):
sent with its statement and collected just before the next model request goes out, or before
anything else uses the connection (:mod:`core.in_flight`)."""

from __future__ import annotations

from typing import Any, NoReturn, Protocol

from django.db import DatabaseError, Error, connection

from core import fastdb, in_flight


class _Step(Protocol):
    def raise_failed(self, exc: DatabaseError) -> NoReturn: ...

    def saved(self, row: tuple[Any, ...] | None) -> None: ...


class CommitInFlight:
    """A step's statement and COMMIT sent by step_transaction(commit_later=True), held in
    :mod:`core.in_flight` until collected."""

    def __init__(self, tx: _Step, sent: fastdb.SentCommit) -> None:
        self.tx = tx
        self.sent = sent
        # Safety net: a query through Django's cursor outside any tenant block (which would
        # settle it) collects the commit first.
        connection.execute_wrappers.append(self.settle_first)
        in_flight.hold(self.settle)

    def settle_first(self, execute: Any, sql: Any, params: Any, many: bool, context: Any) -> Any:
        in_flight.settle()
        return execute(sql, params, many, context)

    def settle(self) -> None:
        try:
            row = self.sent.result()
        except DatabaseError as exc:
            roll_back_manual()
            self.tx.raise_failed(exc)
        except BaseException:
            roll_back_manual()
            raise
        finally:
            if self.settle_first in connection.execute_wrappers:
                connection.execute_wrappers.remove(self.settle_first)
        if connection.in_atomic_block:
            # A bug: a transaction was opened without settling first (tenant_context does).
            # Django cannot leave manual mode inside it; the connection is dropped instead.
            connection.close()
            raise RuntimeError("A step's commit in flight was collected inside a transaction.")
        end_manual()  # the step's on-commit hooks run here
        self.tx.saved(row)


def settle_in_flight() -> bool:
    """Wait for this thread's step commit in flight, if any (see
    :func:`agents.runtime.store.step_transaction`); raises :class:`LeaseLost` or the database
    error if it failed. True if there was one."""
    return in_flight.settle()


def commit_in_flight() -> bool:
    return in_flight.pending()


def end_manual() -> None:
    """End a manual-mode step transaction whose COMMIT has been done (sent with its statement):
    Django's commit finds nothing left to do, and turning autocommit back on runs the
    transaction's on-commit hooks."""
    try:
        connection.commit()
        connection.set_autocommit(True)
    except Error:
        connection.close()  # the next use reconnects, in autocommit mode
        raise


def roll_back_manual() -> None:
    """Roll back a manual-mode step transaction that failed, and leave manual mode. A connection
    that cannot even roll back is closed (as Django's atomic does); the next use reconnects in
    autocommit mode."""
    try:
        connection.rollback()
        connection.set_autocommit(True)
    except Error:
        connection.close()
