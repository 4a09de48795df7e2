"""A mail backend that refuses every message, as an unreachable SMTP server would."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.core.mail.backends.base import BaseEmailBackend


class RefusingBackend(BaseEmailBackend):
    def send_messages(self, email_messages: Sequence[Any]) -> int:
        raise ConnectionRefusedError("the mail server refused the connection")
