"""Reads of members and invitations."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import QuerySet

from core import tenancy
from core.models import Membership, Role, User
from members.models import Invitation, hash_token

# The transaction-local setting the ``invitation_lookup`` policy (members 0002) compares with.
LOOKUP_SETTING = "app.invitation_token_hash"


@contextmanager
def invitation_lookup_context(token_hash: str, *, using: str = DEFAULT_DB_ALIAS) -> Iterator[None]:
    """The block may read the one invitation whose token hash is ``token_hash``, and nothing else.

    The accept page has no login and so no tenant: as API-key authentication does
    (:func:`core.tenancy.api_key_lookup_context`), no tenant is set and a SELECT-only policy shows
    exactly the row the setting names. The caller then enters the invitation's agency to write.
    """
    with tenancy.tenant_context(using=using):
        _set_lookup(token_hash, using)
        try:
            yield
        finally:
            if not connections[using].needs_rollback:
                _set_lookup("", using)


def _set_lookup(value: str, using: str) -> None:
    with connections[using].cursor() as cursor:
        cursor.execute("SELECT set_config(%s, %s, true)", [LOOKUP_SETTING, value])


def invitation_for_token(*, token: str) -> Invitation | None:
    """The invitation ``token`` opens (pending or not), else None. No tenant needed."""
    if not token or len(token) > 200:
        return None
    with invitation_lookup_context(hash_token(token)):
        return Invitation.objects.filter(token_hash=hash_token(token)).first()


def members_of(*, agency_id: uuid.UUID) -> QuerySet[Membership]:
    """The agency's memberships with their logins. Precondition: the agency's context."""
    return Membership.objects.filter(agency_id=agency_id).select_related("user")


def users_with_email(*, email: str) -> QuerySet[User]:
    """Logins (platform-wide) whose address is ``email``, whatever its case."""
    return User.objects.filter(email__iexact=email.strip())


def admin_count(*, agency_id: uuid.UUID) -> int:
    return Membership.objects.filter(agency_id=agency_id, role=Role.ADMIN).count()
