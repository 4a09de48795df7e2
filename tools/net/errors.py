"""The one error type of :mod:`tools.net`, with a code the tool and the trace can branch on."""

from __future__ import annotations

from typing import Literal

FetchErrorCode = Literal[
    "bad_url",
    "bad_scheme",
    "blocked_address",
    "dns_error",
    "timeout",
    "too_large",
    "too_many_redirects",
    "http_error",
    "unsupported_content",
    "unsupported_encoding",
]


class FetchError(Exception):
    """A fetch that was refused or failed; ``str(exc)`` is meant for the model's tool result."""

    def __init__(
        self, code: FetchErrorCode, message: str, *, url: str = "", status: int | None = None
    ) -> None:
        super().__init__(message)
        self.code: FetchErrorCode = code
        self.message = message
        self.url = url
        self.status = status  # the HTTP status for "http_error" answers, else None
