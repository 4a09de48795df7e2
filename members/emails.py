"""The invitation e-mail, sent through Django's mailer (``MAILERS``: SMTP, console, ...)."""

from __future__ import annotations

from django.conf import settings
from django.core.mail import EmailMultiAlternatives
from django.template.loader import render_to_string
from django.urls import reverse

from core.models import Agency
from members.models import Invitation


def accept_url(token: str) -> str:
    """The invitation's link, absolute: where people reach this platform (AGENTDESK_BASE_URL),
    never the Host header of the request that sent it."""
    base = str(settings.AGENTDESK_BASE_URL).rstrip("/")
    return base + reverse("members:accept", kwargs={"token": token})


def send_invitation_email(*, invitation: Invitation, agency: Agency, token: str) -> None:
    """Raises whatever the mail backend raises (the caller rolls the invitation back)."""
    inviter = invitation.invited_by
    context = {
        "agency": agency,
        "role": invitation.get_role_display(),
        "inviter": (inviter.get_full_name() or inviter.get_username()) if inviter else "",
        "url": accept_url(token),
        "expires_at": invitation.expires_at,
    }
    message = EmailMultiAlternatives(
        subject=f"You are invited to join {agency.name} on AgentDesk",
        body=render_to_string("members/invitation_email.txt", context),
        to=[invitation.email],
    )
    message.attach_alternative(
        render_to_string("members/invitation_email.html", context), "text/html"
    )
    message.send()
