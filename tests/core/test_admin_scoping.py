"""Agency staff work only inside their agency in the admin."""

from __future__ import annotations

import pytest
from django.test import Client

from core import tenancy
from core.models import Role, Site
from tests.factories import AgencyFactory, MembershipFactory, SiteFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def setup() -> dict:
    a, b = AgencyFactory.create(), AgencyFactory.create()
    return {
        "a": a,
        "b": b,
        "a_site": SiteFactory.create(agency=a, name="Alpha site"),
        "b_site": SiteFactory.create(agency=b, name="Beta site"),
        "staff": MembershipFactory.create(agency=a, role=Role.STAFF).user,
        "viewer": MembershipFactory.create(agency=a, role=Role.VIEWER).user,
    }


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_staff_lists_only_their_agencys_sites(setup: dict) -> None:
    response = _client(setup["staff"]).get("/admin/core/site/")
    assert response.status_code == 200
    assert b"Alpha site" in response.content
    assert b"Beta site" not in response.content


def test_staff_gets_404_for_another_agencys_object(setup: dict) -> None:
    client = _client(setup["staff"])
    assert client.get(f"/admin/core/site/{setup['b_site'].id}/change/").status_code == 404
    assert client.get(f"/admin/core/site/{setup['b_site'].id}/delete/").status_code == 404
    assert client.get(f"/admin/core/agency/{setup['b'].id}/change/").status_code == 404
    assert client.get(f"/admin/core/site/{setup['a_site'].id}/change/").status_code == 200


def test_staff_cannot_edit_another_agencys_object_by_post(setup: dict) -> None:
    response = _client(setup["staff"]).post(
        f"/admin/core/site/{setup['b_site'].id}/change/",
        {"name": "hijacked", "domain": "x", "is_active": "on"},
    )
    assert response.status_code == 404
    with tenancy.platform_context():
        assert Site.objects.get(pk=setup["b_site"].pk).name == "Beta site"


def test_staff_creates_sites_in_their_own_agency_only(setup: dict) -> None:
    response = _client(setup["staff"]).post(
        "/admin/core/site/add/",
        # An agency field smuggled into the form is ignored: it is not a form field for staff.
        {
            "name": "New site",
            "domain": "new.example.com",
            "is_active": "on",
            "agency": str(setup["b"].id),
        },
    )
    assert response.status_code == 302
    with tenancy.platform_context():
        assert Site.objects.get(name="New site").agency_id == setup["a"].id


def test_viewer_can_read_but_not_change(setup: dict) -> None:
    client = _client(setup["viewer"])
    assert client.get("/admin/core/site/").status_code == 200
    assert client.get("/admin/core/site/add/").status_code == 403
    response = client.post(
        f"/admin/core/site/{setup['a_site'].id}/change/",
        {"name": "renamed", "domain": "x", "is_active": "on"},
    )
    assert response.status_code == 403


def test_superuser_sees_every_agency(setup: dict, django_user_model) -> None:
    admin = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    response = _client(admin).get("/admin/core/site/")
    assert b"Alpha site" in response.content
    assert b"Beta site" in response.content
