"""The development e-mail backend (``MAILERS`` default): each e-mail is one INFO log line (logger
``core.mail``) instead of a MIME dump on stdout. Nothing is sent.

Django's console backend writes the raw message to stdout, which a Celery worker logs as a
WARNING of ``celery.redirected`` with its line breaks escaped (``LOGGING``'s formatter escapes
control characters), headers and all. Here the recipients, subject and plain-text body are
logged, the body's lines joined with " | ", so a link ("Decide here: http://...") can be copied
from the log. Set ``AGENTDESK_MAIL_BACKEND`` to a real backend (SMTP) to send e-mail.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from django.core.mail import EmailMessage
from django.core.mail.backends.base import BaseEmailBackend

logger = logging.getLogger(__name__)
BODY_MAX_CHARS = 4000  # of a logged body: an agent's long e-mail stays one readable line


def _one_line(body: str) -> str:
    text = " | ".join(line.strip() for line in body.splitlines() if line.strip())
    if len(text) > BODY_MAX_CHARS:
        return f"{text[:BODY_MAX_CHARS]}… ({len(text) - BODY_MAX_CHARS} more characters)"
    return text


class LogEmailBackend(BaseEmailBackend):
    """Logs each e-mail (to, subject, body) at INFO and reports it sent."""

    def send_messages(self, email_messages: Sequence[EmailMessage]) -> int:
        for message in email_messages:
            recipients = ", ".join(message.recipients()) or "nobody"
            logger.info(
                "e-mail (not sent: development mail backend) to %s: %s — %s",
                recipients,
                message.subject,
                _one_line(str(message.body)),
            )
        return len(email_messages)
