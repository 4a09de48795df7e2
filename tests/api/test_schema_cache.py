"""The API docs page fetches the OpenAPI schema at each visit, and each request generated it
again (0.3-2.5 s of a core: issue 27, the docs page took 1.9 s). The schema is the code's, the
same for whoever asks, so a process generates it once per format and answers later requests
from memory; a request naming a ``lang`` or a ``version`` (values from the request) is generated
each time, and a changed setting forgets what was generated."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from core.api.schema_view import SchemaView, forget_generated
from core.models import User

pytestmark = pytest.mark.django_db


@pytest.fixture
def generations(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[object]]:
    """Each schema generation the view runs (the real generator, counted)."""
    forget_generated()
    made: list[object] = []
    generate = SchemaView.generator_class.get_schema

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        made.append(self)
        return generate(self, *args, **kwargs)

    monkeypatch.setattr(SchemaView.generator_class, "get_schema", counted)
    yield made
    forget_generated()


def _get(client: APIClient, **params: str) -> bytes:
    response = client.get("/api/schema/", params)
    assert response.status_code == 200
    return bytes(response.content)


def test_the_schema_is_generated_once_and_then_served_from_memory(
    generations: list[object],
) -> None:
    client = APIClient()
    first = _get(client, format="json")
    assert [_get(client, format="json") for _ in range(3)] == [first] * 3
    assert len(generations) == 1
    yaml = client.get("/api/schema/")  # the other format: its own, generated once too
    assert yaml["Content-Disposition"] == 'inline; filename="AgentDesk API.yaml"'
    assert client.get("/api/schema/")["Content-Disposition"] == yaml["Content-Disposition"]
    assert len(generations) == 2


def test_the_schema_is_the_same_for_anyone_who_asks(
    generations: list[object], django_user_model: type[User]
) -> None:
    anonymous = _get(APIClient(), format="json")
    forget_generated()
    staff = APIClient()
    staff.force_authenticate(django_user_model.objects.create_superuser("root", "r@x.io", "pw"))
    assert _get(staff, format="json") == anonymous
    assert len(generations) == 2


def test_a_request_naming_a_language_or_a_version_is_not_kept(
    generations: list[object],
) -> None:
    client = APIClient()
    for _ in range(2):
        _get(client, format="json", lang="en")
        _get(client, format="json", version="1")
    assert len(generations) == 4


def test_a_changed_setting_forgets_the_generated_schema(generations: list[object]) -> None:
    client = APIClient()
    _get(client, format="json")
    with override_settings(ROOT_URLCONF="tests.core.failing_site"):  # other URLs: generated again
        _get(client, format="json")
    _get(client, format="json")  # and again with the first ones back
    assert len(generations) == 3
