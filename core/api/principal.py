"""Who an API request acts as: its agency and role, resolved once after authentication.

The tenant comes from the credential (an API key's agency, a user's membership), never from
request input. The single exception is a superuser, who belongs to no agency: reads see every
agency, and ``?agency=<id>`` picks the agency a superuser acts in (required for writes).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from rest_framework.exceptions import ValidationError
from rest_framework.request import Request

from core import tenancy
from core.models import ActorType, Agency, Role, User
from core.models.api_keys import ApiKey
from core.selectors import membership_for_user

SUPERUSER_AGENCY_PARAM = "agency"


@dataclass(frozen=True)
class Principal:
    authenticated: bool = False
    agency_id: uuid.UUID | None = None  # the tenant; None: no agency (or all, for superusers)
    role: str | None = None  # a Role value; superusers have every role
    user_id: int | None = None  # None for API keys
    api_key: ApiKey | None = None
    is_superuser: bool = False

    def has_role(self, roles: frozenset[str]) -> bool:
        return self.is_superuser or (self.role is not None and self.role in roles)

    @property
    def actor_type(self) -> str:
        """Who events caused by this principal name as their actor."""
        return ActorType.API if self.api_key is not None else ActorType.USER

    @property
    def actor_id(self) -> str:
        return f"api_key:{self.api_key.prefix}" if self.api_key is not None else ""


ANONYMOUS = Principal()


def _superuser_agency(request: Request) -> uuid.UUID | None:
    raw = request.query_params.get(SUPERUSER_AGENCY_PARAM)
    if not raw:
        return None
    try:
        agency_id = uuid.UUID(raw)
    except ValueError:
        raise ValidationError({SUPERUSER_AGENCY_PARAM: ["Must be an agency id."]}) from None
    with tenancy.platform_context():
        if not Agency.objects.filter(pk=agency_id).exists():
            raise ValidationError({SUPERUSER_AGENCY_PARAM: ["No such agency."]})
    return agency_id


def principal_for(request: Request) -> Principal:
    if isinstance(request.auth, ApiKey):
        return principal_for_key(request.auth)
    user = request.user
    if user is None or not user.is_authenticated:
        return ANONYMOUS
    if user.is_superuser:
        return principal_for_user(user, superuser_agency=_superuser_agency(request))
    return principal_for_user(user)


def principal_for_key(key: ApiKey) -> Principal:
    return Principal(True, agency_id=key.agency_id, role=key.role, api_key=key)


def principal_for_user(user: User, *, superuser_agency: uuid.UUID | None = None) -> Principal:
    """A logged-in person's agency and role (REST requests, websockets); a superuser acts in
    ``superuser_agency``, or across agencies when it is None."""
    if user.is_superuser:
        return Principal(
            True, agency_id=superuser_agency, role=Role.ADMIN, user_id=user.pk, is_superuser=True
        )
    # The same resolution as core.middleware.TenantMiddleware, which never sees token logins.
    with tenancy.tenant_context(user_id=user.pk):
        membership = membership_for_user(user=user)
    if membership is None:
        return Principal(True, user_id=user.pk)
    with tenancy.agency_context(membership.agency_id):
        active = Agency.objects.filter(pk=membership.agency_id, is_active=True).exists()
    if not active:
        return Principal(True, user_id=user.pk)
    return Principal(True, agency_id=membership.agency_id, role=membership.role, user_id=user.pk)


@contextmanager
def principal_context(principal: Principal) -> Iterator[None]:
    """A transaction scoped to what the principal may see (a savepoint inside the request's)."""
    if principal.agency_id is not None:
        with tenancy.agency_context(principal.agency_id):
            yield
    elif principal.is_superuser:
        with tenancy.platform_context():
            yield
    else:
        with tenancy.tenant_context():
            yield
