"""What probing the admin as an attacker found: a NUL in a list filter or the search box was a 500
(PostgreSQL refuses NUL in text) and is now a 400 for every changelist; ``link()`` escapes the
text it falls back to when a model has no admin page."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.conf import settings
from django.contrib import admin
from django.db import DataError
from django.test import Client, override_settings
from django.urls import reverse

from agents.admin.common import link
from core.models import User
from tests.factories import AgencyFactory

pytestmark = pytest.mark.django_db

MODEL_ADMINS = sorted(admin.site._registry.items(), key=lambda item: item[0]._meta.label)


def _label(item: Any) -> str:
    return str(item[0]._meta.label)


def _changelist(model: type[Any]) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")


def _filter_parameters(client: Client, url: str) -> list[str]:
    response = client.get(url)
    assert response.status_code == 200, url
    changelist = response.context["cl"]
    return sorted({p for spec in changelist.filter_specs for p in spec.expected_parameters()})


@pytest.mark.parametrize("item", MODEL_ADMINS, ids=_label)
def test_a_nul_in_any_filter_or_search_of_any_changelist_is_a_400(
    item: Any, superuser: User, login: Callable[[User], Client]
) -> None:
    model, _model_admin = item
    AgencyFactory.create()
    client = login(superuser)
    url = _changelist(model)
    parameters = [*_filter_parameters(client, url), "q", "o", "p"]
    for parameter in parameters:
        response = client.get(f"{url}?{parameter}=%00")
        assert response.status_code == 400, (url, parameter, response.status_code)
        assert b"NUL" in response.content
        # Inside a value, and as a parameter's name.
        assert client.get(f"{url}?{parameter}=a%00b").status_code == 400, (url, parameter)
    assert client.get(f"{url}?%00=1").status_code == 400


def test_the_listed_pages_filter_normally_without_a_nul(
    superuser: User, login: Callable[[User], Client]
) -> None:
    client = login(superuser)
    for name in ("agents_execution", "approvals_approval", "tools_toolcall"):
        response = client.get(reverse(f"admin:{name}_changelist"), {"q": "x"})
        assert response.status_code == 200, name


def test_without_the_middleware_a_nul_reaches_postgresql(
    superuser: User, login: Callable[[User], Client]
) -> None:
    """The cause, shown: the search box passes the NUL to a query, which psycopg refuses."""
    without = [m for m in settings.MIDDLEWARE if not m.endswith("RejectNulMiddleware")]
    with override_settings(MIDDLEWARE=without):
        client = login(superuser)
        with pytest.raises(DataError, match="NUL"):
            client.get(f"{_changelist(admin_models('agents', 'execution'))}?status=%00")


def admin_models(app_label: str, model_name: str) -> type[Any]:
    from django.apps import apps

    return apps.get_model(app_label, model_name)


def test_pages_outside_the_admin_refuse_a_nul_too(db: None) -> None:
    response = Client().get("/admin/login/?next=%00")
    assert response.status_code == 400


# --- link() ------------------------------------------------------------------------------------


def test_link_escapes_the_text_of_a_model_without_an_admin_page() -> None:
    from agents.models import AgentGoal

    assert AgentGoal not in admin.site._registry  # no page: link() falls back to its text
    goal = AgentGoal(description="x")
    rendered = link(goal, '<script>alert("x")</script>')
    assert "<script>" not in rendered
    assert "&lt;script&gt;" in rendered


def test_link_escapes_the_text_of_a_linked_object() -> None:
    agency = AgencyFactory.build(name="<b>Acme</b>")
    rendered = link(agency)
    assert "<b>" not in rendered
    assert "&lt;b&gt;Acme&lt;/b&gt;" in rendered
    assert rendered.startswith("<a href=")


def test_link_of_nothing_is_a_dash() -> None:
    assert link(None) == "-"
