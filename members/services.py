"""Writers for members and invitations: the only code that changes who belongs to an agency.

Every function raises :class:`core.exceptions.ApplicationError` (400 unless said otherwise) and
writes nothing when it does.
"""

from __future__ import annotations

import datetime
import logging
import uuid

from django.conf import settings
from django.contrib.auth.base_user import BaseUserManager
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.utils import timezone

from core import realtime, tenancy
from core.exceptions import ApplicationError
from core.models import Agency, Membership, Role, User
from members.emails import send_invitation_email
from members.models import Invitation, hash_token, new_token
from members.selectors import users_with_email

logger = logging.getLogger(__name__)


def expiry_from(now: datetime.datetime) -> datetime.datetime:
    return now + datetime.timedelta(days=settings.AGENTDESK_INVITATION_EXPIRY_DAYS)


def _clean_role(role: str) -> str:
    if role not in Role.values:
        raise ApplicationError(
            "invalid_role",
            f"Unknown role {role!r}: one of {', '.join(Role.values)}.",
            fields={"role": ["Unknown role."]},
        )
    return role


def _clean_email(email: str) -> str:
    email = BaseUserManager.normalize_email((email or "").strip())
    try:
        validate_email(email)
    except ValidationError:
        raise ApplicationError(
            "invalid_email",
            f"{email!r} is not a valid e-mail address.",
            fields={"email": ["Enter a valid e-mail address."]},
        ) from None
    return email


def _clean_username(username: str) -> str:
    username = (username or "").strip()
    if not username:
        return ""
    try:
        User.username_validator(username)
    except ValidationError as exc:
        raise ApplicationError(
            "invalid_username", exc.messages[0], fields={"username": exc.messages}
        ) from None
    if len(username) > 150:
        message = "A username has at most 150 characters."
        raise ApplicationError("invalid_username", message, fields={"username": [message]})
    return username


def _send(invitation: Invitation, agency: Agency, token: str) -> None:
    """Sent inside the caller's transaction: a refused e-mail rolls the invitation back, so there
    is never a pending invitation whose link nobody received (the admin is told to retry)."""
    try:
        send_invitation_email(invitation=invitation, agency=agency, token=token)
    except Exception as exc:
        logger.exception("invitation %s: the e-mail could not be sent", invitation.pk)
        raise ApplicationError(
            "mail_unavailable",
            "The invitation e-mail could not be sent; nothing was saved. Try again later.",
            status=503,
        ) from exc


def invitation_check(
    *, agency: Agency, email: str, role: str, username: str = ""
) -> tuple[str, str, str]:
    """The invitation's cleaned (email, role, username), or the reason it would be refused
    (all but a race with another admin's invitation). Precondition: the agency's context."""
    email = _clean_email(email)
    role = _clean_role(role)
    username = _clean_username(username)
    if Membership.objects.filter(agency=agency, user__email__iexact=email).exists():
        raise ApplicationError(
            "already_member",
            f"{email} is already a member of {agency.name}.",
            fields={"email": ["Already a member."]},
            status=409,
        )
    pending = Invitation.objects.filter(
        agency=agency,
        email__iexact=email,
        accepted_at__isnull=True,
        revoked_at__isnull=True,
        expires_at__gt=timezone.now(),
    ).first()
    if pending is not None:
        raise _duplicate(email, pending)
    return email, role, username


def _duplicate(email: str, pending: Invitation | None) -> ApplicationError:
    until = f" (until {pending.expires_at:%Y-%m-%d %H:%M} UTC)" if pending else ""
    return ApplicationError(
        "duplicate_invitation",
        f"{email} already has a pending invitation{until}: resend or revoke it.",
        fields={"email": ["An invitation is already pending."]},
        invitation_id=str(pending.pk) if pending else None,
        status=409,
    )


def invitation_create(
    *,
    agency: Agency,
    email: str,
    role: str,
    username: str = "",
    invited_by: User | None = None,
) -> Invitation:
    """Invite ``email`` into ``agency`` with ``role`` and e-mail the one-time link.

    Refused (400): an invalid address, role or username; an address that already belongs to a
    member; an address with an open invitation (resend that one instead). An expired open
    invitation for the address is revoked on the way. Precondition: the agency's context.
    """
    email, role, username = invitation_check(
        agency=agency, email=email, role=role, username=username
    )
    now = timezone.now()
    with transaction.atomic():
        open_ones = Invitation.objects.select_for_update().filter(
            agency=agency, email__iexact=email, accepted_at__isnull=True, revoked_at__isnull=True
        )
        for existing in open_ones:
            if existing.expires_at > now:
                raise _duplicate(email, existing)
            existing.revoked_at = now
            existing.save(update_fields=["revoked_at", "updated_at"])
        token = new_token()
        try:
            with transaction.atomic():
                invitation = Invitation.objects.create(
                    agency=agency,
                    email=email,
                    role=role,
                    username=username,
                    token_hash=hash_token(token),
                    invited_by=invited_by,
                    expires_at=expiry_from(now),
                    last_sent_at=now,
                    send_count=1,
                )
        except IntegrityError:  # another admin's invitation of the same address, just now
            raise _duplicate(email, None) from None
        _send(invitation, agency, token)
    return invitation


def invitation_resend(*, invitation: Invitation, agency: Agency) -> Invitation:
    """A new link (the old one stops working) valid for the full period again, e-mailed.
    Refused for an accepted or revoked invitation. Precondition: the agency's context."""
    now = timezone.now()
    with transaction.atomic():
        locked = Invitation.objects.select_for_update().get(pk=invitation.pk)
        if locked.accepted_at is not None or locked.revoked_at is not None:
            raise ApplicationError(
                "not_pending",
                f"This invitation was {locked.status}: invite the person again.",
                status=409,
            )
        token = new_token()
        locked.token_hash = hash_token(token)
        locked.expires_at = expiry_from(now)
        locked.last_sent_at = now
        locked.send_count += 1
        locked.save(
            update_fields=["token_hash", "expires_at", "last_sent_at", "send_count", "updated_at"]
        )
        _send(locked, agency, token)
    return locked


def invitation_revoke(*, invitation: Invitation) -> Invitation:
    """Its link stops working (idempotent). An accepted invitation cannot be revoked: remove
    the member instead. Precondition: the agency's context."""
    with transaction.atomic():
        locked = Invitation.objects.select_for_update().get(pk=invitation.pk)
        if locked.accepted_at is not None:
            raise ApplicationError(
                "not_pending", "This invitation was accepted: remove the member instead."
            )
        if locked.revoked_at is None:
            locked.revoked_at = timezone.now()
            locked.save(update_fields=["revoked_at", "updated_at"])
    return locked


# --- accepting ------------------------------------------------------------------------------------


def _lock_pending(invitation_id: uuid.UUID) -> Invitation:
    locked = Invitation.objects.select_for_update().get(pk=invitation_id)
    if not locked.is_pending:
        raise ApplicationError(
            "invitation_unusable", f"This invitation link can no longer be used ({locked.status})."
        )
    return locked


def _join(invitation: Invitation, user: User) -> Membership:
    membership = Membership.objects.create(
        agency_id=invitation.agency_id, user=user, role=invitation.role
    )
    invitation.accepted_at = timezone.now()
    invitation.accepted_by = user
    invitation.save(update_fields=["accepted_at", "accepted_by", "updated_at"])
    return membership


def invitation_accept_new_user(
    *, invitation: Invitation, username: str, password: str
) -> Membership:
    """A new login (``username``, ``password``, the invitation's address; admin access) and its
    membership with the invitation's role; the invitation is used up. Refused: a username taken,
    a weak password, an address that already has a login (log in instead), an invitation no
    longer pending. No tenant needed: the agency comes from the invitation."""
    username = _clean_username(username)
    if not username:
        raise ApplicationError(
            "invalid_username", "Choose a username.", fields={"username": ["Required."]}
        )
    candidate = User(username=username, email=invitation.email)
    try:
        validate_password(password, user=candidate)
    except ValidationError as exc:
        raise ApplicationError(
            "weak_password", " ".join(exc.messages), fields={"password": exc.messages}
        ) from None
    with tenancy.agency_context(invitation.agency_id):
        locked = _lock_pending(invitation.pk)
        if users_with_email(email=locked.email).exists():
            raise ApplicationError(
                "login_exists",
                f"{locked.email} already has an AgentDesk login: log in with it to accept.",
            )
        if User.objects.filter(username__iexact=username).exists():
            raise ApplicationError(
                "username_taken",
                f"The username {username!r} is taken; choose another.",
                fields={"username": ["Taken."]},
            )
        user = User.objects.create_user(
            username=username, email=locked.email, password=password, is_staff=True
        )
        return _join(locked, user)


def invitation_accept_existing_user(*, invitation: Invitation, user: User) -> Membership:
    """The login ``user`` (who has just proved its password) joins the invitation's agency.
    Refused: the login's address is not the invitation's, it already belongs to an agency (a
    login belongs to one), or the invitation is no longer pending."""
    if (user.email or "").strip().lower() != invitation.email.strip().lower():
        raise ApplicationError(
            "wrong_login", "This login's e-mail address is not the one the invitation was sent to."
        )
    with tenancy.tenant_context(user_id=user.pk):
        elsewhere = Membership.objects.filter(user=user).exists()
    if elsewhere:
        raise ApplicationError(
            "member_elsewhere",
            "This login already belongs to an agency (a login belongs to one). Ask the person who "
            "invited you to invite another address.",
        )
    with tenancy.agency_context(invitation.agency_id):
        locked = _lock_pending(invitation.pk)
        if not user.is_staff or not user.is_active:
            user.is_staff = user.is_active = True
            user.save(update_fields=["is_staff", "is_active"])
        return _join(locked, user)


# --- members --------------------------------------------------------------------------------------


def _lock_admins(agency_id: uuid.UUID) -> list[Membership]:
    """Every admin membership of the agency, locked: two admins demoting each other at once
    cannot both pass the last-admin check."""
    return list(
        Membership.objects.select_for_update()
        .filter(agency_id=agency_id, role=Role.ADMIN)
        .order_by("pk")
    )


def _guard_last_admin(membership: Membership, admins: list[Membership], what: str) -> None:
    if membership.role == Role.ADMIN and [m.pk for m in admins] == [membership.pk]:
        raise ApplicationError(
            "last_admin",
            f"The agency's last admin cannot be {what}: make another member admin first.",
        )


def membership_change_role(*, membership: Membership, role: str) -> Membership:
    """Give a member another role; the agency's last admin keeps theirs. The member's open
    sockets close once it commits (they reconnect with the new role). Precondition: the
    agency's context."""
    role = _clean_role(role)
    with transaction.atomic():
        admins = _lock_admins(membership.agency_id)
        locked = Membership.objects.select_for_update().get(pk=membership.pk)
        if locked.role == role:
            return locked
        if role != Role.ADMIN:
            _guard_last_admin(locked, admins, "demoted")
        locked.role = role
        locked.save(update_fields=["role", "updated_at"])
        realtime.credential_changed_on_commit(
            [realtime.login_group(locked.user_id)],
            change=realtime.CREDENTIAL_ROLE_CHANGED,
            reason=f"role changed to {role}",
        )
    return locked


def membership_remove(*, membership: Membership) -> None:
    """The member leaves the agency: their login stays (platform-wide) but sees no agency from
    the next request on, over the admin and the API alike, and their open sockets close once
    it commits. The last admin cannot be removed. Precondition: the agency's context."""
    with transaction.atomic():
        admins = _lock_admins(membership.agency_id)
        locked = Membership.objects.select_for_update().get(pk=membership.pk)
        _guard_last_admin(locked, admins, "removed")
        locked.delete()
        realtime.credential_changed_on_commit(
            [realtime.login_group(locked.user_id)],
            change=realtime.CREDENTIAL_REMOVED,
            reason="removed from the agency",
        )


def expiry_days() -> int:
    return int(settings.AGENTDESK_INVITATION_EXPIRY_DAYS)
