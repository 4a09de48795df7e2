"""Model prices over REST: members read the platform's and their agency's; agency admins keep
the agency's own (a negotiated rate overriding the platform price); platform prices are
read-only to agencies."""

from __future__ import annotations

from decimal import Decimal

import pytest

from core import tenancy
from core.models import Role
from tests.api.conftest import count, fields_of
from tests.usage.factories import ModelPriceFactory
from usage.models import ModelPrice
from usage.pricing import _load_price

URL = "/api/v1/model-prices/"
PRICE = {"provider": "openai", "model": "gpt-4o-mini", "input_per_mtok": "0.10",
         "output_per_mtok": "0.40"}  # fmt: skip


def test_admin_adds_an_override_that_prices_the_agencys_runs(tenant_a, as_role) -> None:
    client = as_role(Role.ADMIN)
    created = client.post(URL, PRICE, format="json")
    assert created.status_code == 201, created.json()
    data = created.json()
    assert data["is_platform"] is False
    assert _load_price(tenant_a.agency.id, "openai", "gpt-4o-mini").input_per_mtok == Decimal(
        "0.10"
    )
    listed = client.get(URL, {"model": "gpt-4o-mini"}).json()["results"]
    assert {p["is_platform"] for p in listed} == {True, False}  # the platform's and the override

    changed = client.patch(f"{URL}{data['id']}/", {"output_per_mtok": "0.30"}, format="json")
    assert changed.status_code == 200, changed.json()
    assert changed.json()["output_per_mtok"] == "0.300000"
    assert client.delete(f"{URL}{data['id']}/").status_code == 204
    assert count(ModelPrice, agency=tenant_a.agency) == 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"input_per_mtok": "-1"}, "input_per_mtok"),
        ({"cache_read_per_mtok": "-0.5"}, "cache_read_per_mtok"),
        ({"provider": "acme"}, "provider"),
        ({"model": ""}, "model"),
        ({"output_per_mtok": "1e40"}, "output_per_mtok"),
    ],
)
def test_bad_prices_are_400_and_nothing_written(tenant_a, as_role, body, field) -> None:
    response = as_role(Role.ADMIN).post(URL, {**PRICE, **body}, format="json")
    assert field in fields_of(response)
    assert count(ModelPrice, agency=tenant_a.agency) == 0


def test_a_second_price_for_the_same_model_is_a_field_error(tenant_a, as_role) -> None:
    ModelPriceFactory.create(agency=tenant_a.agency, model="gpt-4o-mini")
    errors = fields_of(as_role(Role.ADMIN).post(URL, PRICE, format="json"), 409)
    assert "already has a price" in errors["model"][0]


def test_platform_prices_are_read_only_to_agencies(tenant_a, as_role) -> None:
    with tenancy.platform_context():
        platform = ModelPrice.objects.filter(agency__isnull=True).first()
    assert platform is not None
    client = as_role(Role.ADMIN)
    assert client.get(f"{URL}{platform.id}/").json()["is_platform"] is True
    response = client.patch(f"{URL}{platform.id}/", {"input_per_mtok": "0"}, format="json")
    assert response.status_code == 403
    assert client.delete(f"{URL}{platform.id}/").status_code == 403
    with tenancy.platform_context():
        assert ModelPrice.objects.get(pk=platform.id).input_per_mtok == platform.input_per_mtok


def test_another_agencys_price_is_a_404(tenant_a, tenant_b, as_role) -> None:
    theirs = ModelPriceFactory.create(agency=tenant_b.agency)
    client = as_role(Role.ADMIN)
    assert client.get(f"{URL}{theirs.id}/").status_code == 404
    assert (
        client.patch(f"{URL}{theirs.id}/", {"is_active": False}, format="json").status_code == 404
    )
    assert client.delete(f"{URL}{theirs.id}/").status_code == 404
    ids = {p["id"] for p in client.get(URL, {"is_platform": "false"}).json()["results"]}
    assert ids == set()


@pytest.mark.parametrize("role", [Role.STAFF, Role.APPROVER, Role.VIEWER])
def test_only_agency_admins_write_prices(tenant_a, as_role, role) -> None:
    price = ModelPriceFactory.create(agency=tenant_a.agency)
    client = as_role(role)
    assert client.get(f"{URL}{price.id}/").status_code == 200
    assert client.post(URL, PRICE, format="json").status_code == 403
    assert client.patch(f"{URL}{price.id}/", {}, format="json").status_code == 403
    assert client.delete(f"{URL}{price.id}/").status_code == 403
