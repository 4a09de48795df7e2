"""What an open socket's periodic re-read of its credential finds (live.auth.recheck): the changes
no message announces (a password changed elsewhere, a login or an agency deactivated, a session
gone) and the announced ones, in case their message was lost while Redis was down."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.sessions.models import Session
from django.test import Client
from django.utils import timezone

from core import realtime, tenancy
from core.api.principal import Principal
from core.api_keys.services import api_key_create
from core.models import Agency, Membership, Role
from core.models.api_keys import ApiKey
from live import auth
from tests.factories import MembershipFactory

pytestmark = pytest.mark.django_db


def _session(membership: Membership) -> tuple[auth.Credential, Principal]:
    client = Client()
    client.force_login(membership.user)
    credential = auth.Credential(
        user_id=membership.user_id, session_key=client.cookies["sessionid"].value
    )
    principal = auth.authenticate(credential)
    assert principal is not None
    assert (principal.agency_id, principal.role) == (membership.agency_id, membership.role)
    return credential, principal


def _key_credential(agency: Agency) -> tuple[ApiKey, auth.Credential, Principal]:
    with tenancy.agency_context(agency.id):
        key, full_key = api_key_create(agency_id=agency.id, name="watcher")
    credential = auth.Credential(api_key=full_key)
    principal = auth.authenticate(credential)
    assert principal is not None
    return key, credential, principal


def _deactivate(agency: Agency) -> None:
    with tenancy.platform_context():
        Agency.objects.filter(pk=agency.pk).update(is_active=False)


def test_a_session_still_valid_changes_nothing() -> None:
    assert auth.recheck(*_session(MembershipFactory.create())) is None


def test_a_session_logged_out_expired_or_of_a_changed_password_has_ended() -> None:
    ended = (realtime.CREDENTIAL_ENDED, "session ended")
    member = MembershipFactory.create()
    credential, principal = _session(member)
    Session.objects.filter(pk=credential.session_key).delete()
    assert auth.recheck(credential, principal) == ended

    credential, principal = _session(member)
    Session.objects.filter(pk=credential.session_key).update(expire_date=timezone.now())
    assert auth.recheck(credential, principal) == ended

    credential, principal = _session(member)
    member.user.set_password("a new one, set elsewhere")
    member.user.save(update_fields=["password"])
    assert auth.recheck(credential, principal) == ended

    credential, principal = _session(member)
    member.user.is_active = False
    member.user.save(update_fields=["is_active"])
    assert auth.recheck(credential, principal) == ended


def test_a_member_removed_or_of_a_deactivated_agency_is_removed_and_a_new_role_changes() -> None:
    member = MembershipFactory.create(role=Role.STAFF)
    credential, principal = _session(member)
    with tenancy.agency_context(member.agency_id):
        Membership.objects.filter(pk=member.pk).update(role=Role.VIEWER)
    assert auth.recheck(credential, principal) == (
        realtime.CREDENTIAL_ROLE_CHANGED,
        "rights changed",
    )
    removed = (realtime.CREDENTIAL_REMOVED, "no longer a member of the agency")
    _deactivate(member.agency)
    assert auth.recheck(credential, principal) == removed
    with tenancy.agency_context(member.agency_id):
        Membership.objects.filter(pk=member.pk).delete()
    assert auth.recheck(credential, principal) == removed


def test_a_key_revoked_expired_or_of_a_deactivated_agency_has_ended() -> None:
    agency = MembershipFactory.create().agency
    key, credential, principal = _key_credential(agency)
    assert auth.recheck(credential, principal) is None
    with tenancy.agency_context(agency.id):
        ApiKey.objects.filter(pk=key.pk).update(expires_at=timezone.now())
    assert auth.recheck(credential, principal) == (realtime.CREDENTIAL_ENDED, "API key expired")
    with tenancy.agency_context(agency.id):
        ApiKey.objects.filter(pk=key.pk).update(revoked_at=timezone.now())
    assert auth.recheck(credential, principal) == (realtime.CREDENTIAL_ENDED, "API key revoked")

    _key, credential, principal = _key_credential(agency)
    _deactivate(agency)
    assert auth.recheck(credential, principal) == (
        realtime.CREDENTIAL_ENDED,
        "the key's agency is not active",
    )


def test_a_credential_names_its_groups_without_reading_anything() -> None:
    key = auth.Credential(api_key="adk_0a1b2c3d_secret")
    assert key.groups() == [realtime.api_key_group("0a1b2c3d")]
    assert auth.Credential(api_key="not a key").groups() == []
    session = auth.Credential(user_id=7, session_key="k" * 32)
    assert session.groups() == [realtime.login_group(7), realtime.session_group("k" * 32)]
    assert "k" * 32 not in realtime.session_group("k" * 32)  # a bearer secret stays out of Redis


def test_rechecking_a_session_never_changes_it(settings: Any) -> None:
    """A session signed with a secret since rotated into ``SECRET_KEY_FALLBACKS`` is still valid,
    and keeps its key: Django's ``get_user`` would give it a new one, which the browser never
    learns (logged out by its own page's socket)."""
    credential, principal = _session(MembershipFactory.create())
    settings.SECRET_KEY_FALLBACKS = [settings.SECRET_KEY]
    settings.SECRET_KEY = "a rotated secret key of enough length to be a real one, 0123456789"
    assert auth.recheck(credential, principal) is None
    assert Session.objects.filter(pk=credential.session_key).exists()
