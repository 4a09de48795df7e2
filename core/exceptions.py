"""The one application error type: services raise it with a code; the API maps it to
``{"message", "code", "extra"}`` (400 unless a status is given)."""

from __future__ import annotations

from typing import Any


class ApplicationError(Exception):
    def __init__(self, code: str, message: str, *, status: int = 400, **extra: Any) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self.extra = extra

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"
