"""The tenant comes from the membership (requests) or the enqueuer (tasks), never from input."""

from __future__ import annotations

import pytest
from django.db import connection
from django.http import HttpRequest, HttpResponse
from django.test import RequestFactory

from config.celery_app import app as celery_app
from core.middleware import TenantMiddleware
from core.models import Site
from core.tenancy import TenantTask
from tests.factories import AgencyFactory, MembershipFactory, SiteFactory

pytestmark = pytest.mark.django_db


@celery_app.task(base=TenantTask, name="tests.count_sites")
def count_sites() -> list[str]:
    return sorted(Site.objects.values_list("name", flat=True))


def test_task_runs_inside_the_agency_it_was_enqueued_for() -> None:
    a, b = AgencyFactory.create(), AgencyFactory.create()
    SiteFactory.create(agency=a, name="a1")
    SiteFactory.create(agency=b, name="b1")
    assert count_sites.apply(kwargs={"agency_id": str(a.id)}).get() == ["a1"]
    assert count_sites.apply(kwargs={"agency_id": str(b.id)}).get() == ["b1"]


def test_task_without_agency_is_refused() -> None:
    result = count_sites.apply(kwargs={})
    assert isinstance(result.result, TypeError)


def _seen_agency(request: HttpRequest) -> HttpResponse:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('app.agency_id', true)")
        return HttpResponse(cursor.fetchone()[0])


def test_request_tenant_comes_from_membership_not_from_input() -> None:
    a, b = AgencyFactory.create(), AgencyFactory.create()
    user = MembershipFactory.create(agency=a).user
    request = RequestFactory().get("/", {"agency_id": str(b.id)}, HTTP_X_AGENCY=str(b.id))
    request.user = user
    response = TenantMiddleware(_seen_agency)(request)
    assert response.content.decode() == str(a.id)


def test_user_without_membership_sees_no_tenant() -> None:
    from tests.factories import UserFactory

    request = RequestFactory().get("/")
    request.user = UserFactory.create()
    response = TenantMiddleware(_seen_agency)(request)
    assert response.content.decode() == ""


def _agency_setting() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('app.agency_id', true)")
        return str(cursor.fetchone()[0])


def test_nested_context_gives_the_outer_one_back_after_success_and_after_a_database_error() -> None:
    from django.db import DatabaseError

    from core.tenancy import agency_context

    a, b = AgencyFactory.create(), AgencyFactory.create()
    with agency_context(a.id):
        with agency_context(b.id):
            assert _agency_setting() == str(b.id)
        assert _agency_setting() == str(a.id)
        with pytest.raises(DatabaseError), agency_context(b.id), connection.cursor() as cursor:
            cursor.execute("SELECT 1/0")  # aborts the savepoint, not the outer transaction
        assert _agency_setting() == str(a.id)
        assert Site.objects.filter(agency=b).count() == 0  # still scoped to a
