"""Every admin page of every model renders: an agency-owned model's for agency staff and admins,
only with their agency's rows (another agency's row is a 404); the platform's for superusers. All
of them on the admin theme, with nothing loaded from the internet."""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from typing import Any

import pytest
from axes.models import AccessAttempt
from django.contrib import admin
from django.contrib.auth.models import Group
from django.test import Client, RequestFactory
from django.utils import timezone
from django_celery_beat.models import (
    ClockedSchedule,
    CrontabSchedule,
    IntervalSchedule,
    PeriodicTask,
    SolarSchedule,
)
from rest_framework.authtoken.models import Token, TokenProxy
from unfold.admin import ModelAdmin as UnfoldModelAdmin
from unfold.admin import StackedInline as UnfoldStackedInline
from unfold.admin import TabularInline as UnfoldTabularInline

from agents.models import Agent
from audit.models import AuditEntry
from core.models import Agency, AgencyOwnedModel, Role, User
from tests.admin.conftest import member
from tests.admin.helpers import add_page, admin_url, change_url
from tests.admin.rows import ROWS
from tools.models import McpAllowedAddress

pytestmark = pytest.mark.django_db

# API keys: agency-admin-only pages owned and tested with the API keys feature.
# Single sign-on: agency-admin-only pages, tested in tests/sso/test_admin.py.
TESTED_ELSEWHERE = {
    "core.ApiKey",
    "members.Invitation",  # invitations: tests/members/
    "sso.SsoProvider",
    "sso.SsoIdentity",
}
AGENCY_MODELS = sorted(
    (
        model
        for model in admin.site._registry
        if issubclass(model, AgencyOwnedModel) and model._meta.label not in TESTED_ELSEWHERE
    ),
    key=lambda model: model._meta.label,
)


def _label(model: type[Any]) -> str:
    return str(model._meta.label)


def test_every_agency_owned_admin_is_covered_here() -> None:
    assert set(AGENCY_MODELS) == set(ROWS)


@pytest.mark.parametrize("model", AGENCY_MODELS, ids=_label)
def test_staff_pages_render_with_their_agencys_rows_only(
    model: type[Any],
    agency: Agency,
    other_agency: Agency,
    staff: User,
    login: Callable[[User], Client],
) -> None:
    mine, theirs = ROWS[model](agency), ROWS[model](other_agency)
    client = login(staff)

    changelist = client.get(admin_url(model, "changelist"))
    assert changelist.status_code == 200
    assert str(mine.pk) in changelist.content.decode()
    assert str(theirs.pk) not in changelist.content.decode()

    assert client.get(change_url(mine)).status_code == 200
    assert client.get(change_url(theirs)).status_code == 404
    assert client.get(admin_url(model, "history", theirs.pk)).status_code == 404

    model_admin = admin.site._registry[model]
    url, refused = add_page(model)
    expected_add = 200 if model_admin.has_add_permission(_request(staff, agency)) else refused
    assert client.get(url, follow=True).status_code == expected_add


@pytest.mark.parametrize("model", AGENCY_MODELS, ids=_label)
def test_superuser_pages_render_for_every_agency(
    model: type[Any],
    agency: Agency,
    other_agency: Agency,
    superuser: User,
    login: Callable[[User], Client],
) -> None:
    mine, theirs = ROWS[model](agency), ROWS[model](other_agency)
    client = login(superuser)

    changelist = client.get(admin_url(model, "changelist"))
    assert changelist.status_code == 200
    assert str(mine.pk) in changelist.content.decode()
    assert str(theirs.pk) in changelist.content.decode()
    assert client.get(change_url(theirs)).status_code == 200
    url, refused = add_page(model)
    assert client.get(url, follow=True).status_code in (200, refused)


def _request(user: User, agency: Agency) -> Any:
    """What the tenant middleware would attach, for asking an admin about permissions."""
    request = RequestFactory().get("/")
    request.user = user
    request.membership = user.membership  # type: ignore[attr-defined]
    return request


# --- the admin theme (django-unfold), everywhere -------------------------------------------------


def test_every_admin_and_inline_uses_the_theme() -> None:
    for model, model_admin in admin.site._registry.items():
        assert isinstance(model_admin, UnfoldModelAdmin), model._meta.label
        for inline in model_admin.inlines:
            assert issubclass(inline, UnfoldTabularInline | UnfoldStackedInline), inline


@pytest.mark.parametrize("model", AGENCY_MODELS, ids=_label)
def test_agency_admin_pages_render(
    model: type[Any], agency: Agency, login: Callable[[User], Client]
) -> None:
    """Changelist, add and change pages of every model, for an agency's admin (the role that may
    do the most there)."""
    agency_admin = member(agency, Role.ADMIN)
    row = ROWS[model](agency)
    client = login(agency_admin)
    changelist = client.get(admin_url(model, "changelist"))
    assert changelist.status_code == 200
    assert str(row.pk) in changelist.content.decode()
    assert client.get(change_url(row)).status_code == 200
    model_admin = admin.site._registry[model]
    url, refused = add_page(model)
    expected_add = (
        200 if model_admin.has_add_permission(_request(agency_admin, agency)) else refused
    )
    assert client.get(url, follow=True).status_code == expected_add


def _platform_rows(superuser: User, agency: Agency) -> dict[type[Any], tuple[Any, Any]]:
    """A row of each model that no agency owns, with the id its change page takes."""
    interval = IntervalSchedule.objects.create(every=10, period=IntervalSchedule.SECONDS)
    token = Token.objects.create(user=superuser)
    return {
        Agency: (agency, agency.pk),
        User: (superuser, superuser.pk),
        Group: (Group.objects.create(name="Operators"), None),
        TokenProxy: (token, superuser.pk),  # DRF's token admin is keyed by the user
        IntervalSchedule: (interval, None),
        CrontabSchedule: (
            CrontabSchedule.objects.create(minute="0", hour="9", timezone="UTC"),
            None,
        ),
        SolarSchedule: (
            SolarSchedule.objects.create(event="sunrise", latitude=48.2, longitude=16.4),
            None,
        ),
        ClockedSchedule: (ClockedSchedule.objects.create(clocked_time=timezone.now()), None),
        McpAllowedAddress: (McpAllowedAddress.objects.create(network="10.0.5.0/24"), None),
        AccessAttempt: (
            AccessAttempt.objects.create(
                username="someone",
                ip_address="10.0.5.1",
                user_agent="test",
                get_data="",
                post_data="",
                http_accept="*/*",
                path_info="/admin/login/",
                failures_since_start=2,
            ),
            None,
        ),
        PeriodicTask: (
            PeriodicTask.objects.create(
                name="Smoke", task="agents.reap_expired_leases", interval=interval
            ),
            None,
        ),
    }


# Recorded by the platform, never added by hand: their add page is refused.
RECORDED_PLATFORM_MODELS = {AccessAttempt}  # failed logins (django-axes)
# An agency's audit log, though not an AgencyOwnedModel (the platform's own chain has no
# agency): its pages, read-only for every role, are tested in tests/audit/test_admin.py.
AGENCY_SCOPED_ELSEWHERE = {AuditEntry}
PLATFORM_MODELS = sorted(
    (
        m
        for m in admin.site._registry
        if not issubclass(m, AgencyOwnedModel) and m not in AGENCY_SCOPED_ELSEWHERE
    ),
    key=lambda m: m._meta.label,
)


@pytest.mark.parametrize("model", PLATFORM_MODELS, ids=_label)
def test_platform_pages_render_for_superusers_only(
    model: type[Any],
    agency: Agency,
    superuser: User,
    login: Callable[[User], Client],
) -> None:
    rows = _platform_rows(superuser, agency)
    assert set(rows) == set(PLATFORM_MODELS)
    row, key = rows[model]
    client = login(superuser)
    assert client.get(admin_url(model, "changelist")).status_code == 200
    assert client.get(admin_url(model, "change", key or row.pk)).status_code == 200
    assert client.get(admin_url(model, "add")).status_code == (
        403 if model in RECORDED_PLATFORM_MODELS else 200
    )

    if model is not Agency:  # an agency's own row is its settings page
        agency_admin = login(member(agency, Role.ADMIN))
        assert agency_admin.get(admin_url(model, "changelist")).status_code == 403


def test_the_sidebar_groups_what_each_role_may_open(
    agency: Agency, superuser: User, login: Callable[[User], Client]
) -> None:
    def groups(user: User) -> list[str]:
        page = login(user).get(admin_url(Agent, "changelist")).content.decode()
        found = re.findall(r'<h2 class="font-semibold flex[^"]*"[^>]*>\s*([^<\n]+?)\s*<', page)
        return [html.unescape(title) for title in found]

    assert groups(member(agency, Role.ADMIN)) == [
        "Agents & runs", "Run traces", "Flow analysis", "Evaluations", "Approvals", "Memory",
        "Usage & budgets", "CRM data", "Analysis data", "Agency & access",
    ]  # fmt: skip
    assert groups(superuser)[-1] == "Schedules"


def test_admin_pages_load_nothing_from_the_internet(
    agency: Agency, login: Callable[[User], Client]
) -> None:
    agent = ROWS[Agent](agency)
    client = login(member(agency, Role.ADMIN))
    for url in (admin_url(Agent, "changelist"), change_url(agent), admin_url(Agent, "add")):
        page = client.get(url).content.decode()
        external = re.findall(
            r'<(?:script|link|img)[^>]+(?:src|href)="((?:https?:)?//[^"]+)"', page
        )
        assert external == [], external
        assert re.search(r"@import\s+url\(\s*['\"]?(?:https?:)?//", page) is None
