"""The HTTP clients under the LLM SDKs do not log each request at the default levels."""

from __future__ import annotations

import logging

import pytest


@pytest.mark.parametrize("name", ["httpx", "httpx2", "httpcore", "httpcore2"])
def test_http_client_requests_are_not_logged_at_info(name: str) -> None:
    assert not logging.getLogger(name).isEnabledFor(logging.INFO)
    assert logging.getLogger(name).isEnabledFor(logging.WARNING)
