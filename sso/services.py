"""Who a verified sign-in is: the user, their membership created just in time, the identity."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import transaction
from django.utils import timezone

from core import tenancy
from core.models import Membership, User
from core.selectors import membership_for_user
from sso.models import SsoIdentity, SsoProvider


class SsoRefused(Exception):
    """A sign-in that must not go through; the message is shown to the person signing in."""


def _email(provider: SsoProvider, claims: Mapping[str, Any]) -> str:
    email = str(claims.get("email") or "").strip()
    local, _, domain = email.rpartition("@")
    if not local or not domain:
        raise SsoRefused(f"{provider.display_name} sent no e-mail address (the email scope).")
    if claims.get("email_verified") is False:
        raise SsoRefused(f"{provider.display_name} has not verified {email}.")
    if domain.lower() not in provider.allowed_domains:
        raise SsoRefused(
            f"{provider.display_name} may not sign in addresses at {domain.lower()} "
            "(not one of this agency's allowed domains)."
        )
    return email


def _existing_user(provider: SsoProvider, subject: str, email: str) -> User | None:
    identity = (
        SsoIdentity.objects.filter(provider=provider, subject=subject)
        .select_related("user")
        .first()
    )
    if identity is not None:
        return identity.user
    users = list(User.objects.filter(email__iexact=email)[:2])
    if len(users) > 1:
        raise SsoRefused(f"More than one account has the address {email}: ask an administrator.")
    return users[0] if users else None


def _new_user(provider: SsoProvider, email: str) -> User:
    username = email.lower()
    if User.objects.filter(username__iexact=username).exists():
        raise SsoRefused(f"The user name {username} is taken by another account.")
    user = User.objects.create_user(username=username, email=email, is_staff=True)
    Membership.objects.create(
        agency_id=provider.agency_id, user=user, role=provider.new_member_role
    )
    return user


def sso_login_user(*, provider: SsoProvider, claims: Mapping[str, Any]) -> User:
    """The user ``claims`` sign in as, through ``provider``; raises :class:`SsoRefused`.

    Preconditions: ``claims`` are those of an ID token of the provider's issuer whose signature,
    ``iss``, ``aud``, ``exp`` and nonce were checked (sso.backends). Matched by the provider's
    subject, else by e-mail address. An unknown address in an allowed domain gets a new user and
    a membership of the provider's agency with ``new_member_role`` (just in time). A known user
    is let in only as a member of this agency: a provider grants membership of its own agency
    only, never another's, and never signs in a superuser.
    """
    subject = str(claims.get("sub") or "")
    if not subject:
        raise SsoRefused("The ID token names no subject.")
    email = _email(provider, claims)
    with transaction.atomic():
        with tenancy.agency_context(provider.agency_id):
            user = _existing_user(provider, subject, email)
        if user is None:
            with tenancy.agency_context(provider.agency_id):
                user = _new_user(provider, email)
        elif user.is_superuser:
            raise SsoRefused("A superuser logs in with their password, not single sign-on.")
        else:
            with tenancy.tenant_context(user_id=user.pk):
                membership = membership_for_user(user=user)
            if membership is None or membership.agency_id != provider.agency_id:
                raise SsoRefused(
                    f"{email} is not a member of this agency: {provider.display_name} "
                    "cannot sign them in."
                )
            if not user.is_active:
                raise SsoRefused(f"The account of {email} is deactivated.")
        with tenancy.agency_context(provider.agency_id):
            SsoIdentity.objects.update_or_create(
                agency_id=provider.agency_id,
                provider=provider,
                subject=subject,
                defaults={"user": user, "last_login_at": timezone.now()},
            )
    return user
