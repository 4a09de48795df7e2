"""Reads of single sign-on providers, including the agency-free lookup a sign-in starts with."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import DEFAULT_DB_ALIAS, connections

from core import tenancy
from core.models import User
from core.selectors import membership_for_user
from sso.models import SsoProvider

_SET_LOOKUP = "SELECT set_config('app.sso_slug', %s, true)"


@contextmanager
def provider_lookup_context(slug: str, *, using: str = DEFAULT_DB_ALIAS) -> Iterator[None]:
    """The block may read the one provider whose sign-in name is ``slug``, and nothing else.

    A sign-in starts before anyone is logged in: no tenant is set, and the ``sso_provider_lookup``
    policy (sso 0002) shows exactly the row whose slug equals ``app.sso_slug`` (the pattern of
    webhooks.selectors.webhook_lookup_context; the setting is cleared on exit).
    """
    with tenancy.tenant_context(using=using):
        with connections[using].cursor() as cursor:
            cursor.execute(_SET_LOOKUP, [slug])
        try:
            yield
        finally:
            if not connections[using].needs_rollback:
                with connections[using].cursor() as cursor:
                    cursor.execute(_SET_LOOKUP, [""])


def enabled_provider(*, slug: str) -> SsoProvider | None:
    """The enabled provider signing in at ``/sso/<slug>/``, or None (missing or disabled)."""
    with provider_lookup_context(slug):
        return SsoProvider.objects.filter(slug=slug, is_enabled=True).first()


def password_login_refused(*, user: User) -> bool:
    """Whether ``user`` belongs to an agency whose members sign in through its provider only.
    Superusers never are (they keep their password login)."""
    if user.is_superuser:
        return False
    with tenancy.tenant_context(user_id=user.pk):
        membership = membership_for_user(user=user)
    if membership is None:
        return False
    with tenancy.agency_context(membership.agency_id):
        return SsoProvider.objects.filter(
            agency_id=membership.agency_id, is_enabled=True, password_login_allowed=False
        ).exists()
