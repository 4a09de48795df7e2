"""Every admin page of every agency-owned model renders for agency staff, and only with their
agency's rows; another agency's row is a 404."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib import admin
from django.test import Client, RequestFactory

from core.models import Agency, AgencyOwnedModel, User
from tests.admin.helpers import admin_url, change_url
from tests.admin.rows import ROWS

pytestmark = pytest.mark.django_db

# API keys: agency-admin-only pages owned and tested with the API keys feature.
TESTED_ELSEWHERE = {"core.ApiKey"}
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
    expected_add = 200 if model_admin.has_add_permission(_request(staff, agency)) else 403
    assert client.get(admin_url(model, "add")).status_code == expected_add


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
    assert client.get(admin_url(model, "add")).status_code in (200, 403)


def _request(user: User, agency: Agency) -> Any:
    """What the tenant middleware would attach, for asking an admin about permissions."""
    request = RequestFactory().get("/")
    request.user = user
    request.membership = user.membership  # type: ignore[attr-defined]
    return request
