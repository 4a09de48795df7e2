"""The development e-mail backend (``core.mail``, the default of ``AGENTDESK_MAIL_BACKEND``): each
e-mail is one readable INFO line, its link whole, instead of a MIME dump on stdout."""

from __future__ import annotations

import logging

import pytest
from django.core.mail import send_mass_mail
from django.test import override_settings

LOG_MAILER = {"default": {"BACKEND": "core.mail.LogEmailBackend"}}


@override_settings(MAILERS=LOG_MAILER)
def test_each_e_mail_is_one_info_line_with_its_recipients_subject_and_link(
    caplog: pytest.LogCaptureFixture,
) -> None:
    link = "http://127.0.0.1:8123/approvals/approval/0b9a4c1e-6f7d-4c1b-9a55-2f3c4d5e6f70/"
    body = f"SDR Agent wants to: send an e-mail\nRisk: high.\n\nDecide here: {link}"
    messages = [
        ("[AgentDesk] Approval needed", body, "agents@example.com", [to])
        for to in ("demo@example.com", "approver@example.com")
    ]

    with caplog.at_level(logging.INFO, logger="core.mail"):
        sent = send_mass_mail(messages)

    assert sent == 2
    records = [r for r in caplog.records if r.name == "core.mail"]
    assert [r.levelno for r in records] == [logging.INFO, logging.INFO]
    line = records[1].getMessage()
    assert "\n" not in line
    assert "to approver@example.com: [AgentDesk] Approval needed" in line
    assert line.endswith(f"Risk: high. | Decide here: {link}")
