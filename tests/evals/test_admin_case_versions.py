"""Two admin defects of the test cases (issue 28): a case of an older dataset version answered
500 when saved (the services look for it in the current version), and deleting a case answered
403. An older version's case now opens read only, naming the current version with a link to
the case there; deleting a current case makes a new version without it, the old one keeping it."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.test import Client

from core import tenancy
from core.models import Agency, User
from evals.models import Dataset, TestCase
from evals.services.datasets import dataset_case_change
from tests.admin.helpers import admin_url, change_url
from tests.evals.test_admin import CASE_FORM, _dataset_with_a_case

pytestmark = pytest.mark.django_db


def _cases(dataset: Dataset) -> tuple[Dataset, TestCase]:
    with tenancy.agency_context(dataset.agency_id):
        fresh = Dataset.objects.select_related("current_version").get(pk=dataset.pk)
        return fresh, TestCase.objects.get(version=fresh.current_version)


def test_an_older_versions_case_opens_read_only_and_links_the_current_one(
    agency: Agency, staff: User, login: Callable[[User], Client]
) -> None:
    dataset, old = _cases(_dataset_with_a_case(agency))
    with tenancy.agency_context(agency.id):
        dataset_case_change(
            dataset=dataset, key=str(old.key), changes={"input": "Hello."}, user_id=None
        )
    dataset, current = _cases(dataset)
    client = login(staff)

    page = client.get(change_url(old))
    assert page.status_code == 200
    text = page.content.decode()
    assert "This case belongs to version 2 of Alex&#x27;s cases" in text
    assert "The current version is 3:" in text
    assert f'href="{change_url(current)}"' in text
    assert 'name="_save"' not in text
    # Saving it (the form posted anyway) is refused: before, the services' 404 was a 500.
    assert client.post(change_url(old), {**CASE_FORM, "name": "Changed"}).status_code == 403
    assert client.get(admin_url(TestCase, "delete", old.pk)).status_code == 403
    with tenancy.agency_context(agency.id):
        assert TestCase.objects.get(pk=old.pk).name == "Follow up with Marcus"
        assert Dataset.objects.get(pk=dataset.pk).current_version_id == current.version_id

    # The current version's case is edited as before.
    assert 'name="_save"' in client.get(change_url(current)).content.decode()


def test_deleting_a_case_makes_a_new_version_without_it(
    agency: Agency, staff: User, login: Callable[[User], Client]
) -> None:
    dataset, case = _cases(_dataset_with_a_case(agency))
    client = login(staff)
    url = admin_url(TestCase, "delete", case.pk)
    confirm = client.get(url)
    assert confirm.status_code == 200  # was 403
    assert "left out of a new version of Alex&#x27;s cases (version 2" in confirm.content.decode()

    response = client.post(url, {"post": "yes"}, follow=True)
    assert response.status_code == 200
    assert "Saved as version 3 of Alex&#x27;s cases, without Follow up with Marcus" in (
        response.content.decode()
    )
    with tenancy.agency_context(agency.id):
        fresh = Dataset.objects.select_related("current_version").get(pk=dataset.pk)
        assert fresh.current_version is not None
        assert fresh.current_version.number == 3
        assert fresh.current_version.change_summary == "removed"
        assert not TestCase.objects.filter(version=fresh.current_version).exists()
        assert TestCase.objects.filter(pk=case.pk).exists()  # version 2 keeps it
    # Now of an older version, it is read only.
    assert client.get(url).status_code == 403
