"""Setting up an agency's single sign-on in tests."""

from __future__ import annotations

import uuid

from django.utils import timezone

from core import tenancy
from core.models import Agency, Role
from sso.models import SsoIdentity, SsoProvider
from tests.factories import AgencyFactory, MembershipFactory


def agency_with_sso(
    *,
    issuer: str,
    client_id: str,
    client_secret: str,
    domains: list[str],
    role: str = Role.VIEWER,
    name: str = "Agency",
    password_login_allowed: bool = True,
) -> tuple[Agency, SsoProvider]:
    """A new agency whose enabled provider is ``issuer`` (sign-in name: the agency's slug)."""
    slug = f"{name.lower().replace(' ', '-')}-{uuid.uuid4().hex[:6]}"
    agency = AgencyFactory.create(name=name, slug=slug)
    with tenancy.agency_context(agency.id):
        provider = SsoProvider(
            agency=agency,
            slug=slug,
            display_name=f"{name} Login",
            issuer=issuer,
            client_id=client_id,
            allowed_domains=domains,
            new_member_role=role,
            is_enabled=True,
            password_login_allowed=password_login_allowed,
        )
        provider.set_client_secret(client_secret)
        provider.save()
    return agency, provider


def sso_rows(agency: Agency) -> SsoIdentity:
    """A provider of ``agency`` and the identity of a member who signed in through it."""
    user = MembershipFactory.create(agency=agency).user
    with tenancy.agency_context(agency.id):
        provider = SsoProvider.objects.create(
            agency=agency,
            slug=f"rows-{uuid.uuid4().hex[:8]}",
            display_name="Rows SSO",
            issuer="https://login.example.com",
            client_id="c",
            allowed_domains=["example.com"],
        )
        return SsoIdentity.objects.create(
            agency=agency, provider=provider, subject="s", user=user, last_login_at=timezone.now()
        )
