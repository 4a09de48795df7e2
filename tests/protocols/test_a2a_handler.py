"""The A2A handler's own rules, without a server: an unexpected error in a unit of database work
is logged with its cause and reaches the client as a bare internal error."""

from __future__ import annotations

import asyncio
import logging
import uuid

import pytest
from a2a.utils.errors import InternalError, TaskNotCancelableError

from protocols.a2a.handler import AgentDeskRequestHandler, Caller
from tests.factories import AgencyFactory


def _caller() -> Caller:
    return Caller(agency_id=AgencyFactory.create().id, agent_id=uuid.uuid4(), key_prefix="p")


def test_an_unexpected_error_is_logged_and_not_told_to_the_client(
    live_db: None, caplog: pytest.LogCaptureFixture
) -> None:
    def broken() -> None:
        raise ValueError('relation "secret_table" has the value 42')

    with (
        caplog.at_level(logging.ERROR, logger="protocols.a2a.handler"),
        pytest.raises(InternalError) as raised,
    ):
        asyncio.run(AgentDeskRequestHandler()._in_agency(_caller(), broken))
    assert str(raised.value) == "Internal error; it was logged."
    assert "secret_table" in caplog.text


def test_an_a2a_error_reaches_the_client_as_it_is(live_db: None) -> None:
    def ended() -> None:
        raise TaskNotCancelableError(message="The task has already ended (completed).")

    with pytest.raises(TaskNotCancelableError, match="already ended"):
        asyncio.run(AgentDeskRequestHandler()._in_agency(_caller(), ended))
