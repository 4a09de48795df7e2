"""Writers of model prices over the API. An agency admin keeps the agency's own prices (they
override the platform's for the same provider and model); platform prices (``agency`` NULL)
are changed by superusers only, as in the admin. Prices are cached per process for
``AGENTDESK_CATALOGUE_CACHE_SECONDS`` (:mod:`usage.pricing`): a change applies within that.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db import IntegrityError, transaction

from core.exceptions import ApplicationError
from usage.models import ModelPrice

PRICE_FIELDS = frozenset(
    {
        "provider", "model", "input_per_mtok", "output_per_mtok", "cache_read_per_mtok",
        "cache_write_per_mtok", "is_active",
    }
)  # fmt: skip


def _invalid(fields: dict[str, list[str]], *, status: int = 400) -> ApplicationError:
    first = next(iter(fields.values()))[0]
    return ApplicationError("invalid", f"Invalid input. {first}", fields=fields, status=status)


def _check(fields: dict[str, Any]) -> None:
    unknown = set(fields) - PRICE_FIELDS
    if unknown:
        raise ApplicationError("invalid", f"Unknown price fields: {sorted(unknown)}.")
    negative = [
        name
        for name, value in fields.items()
        if name.endswith("_per_mtok") and value is not None and value < 0
    ]
    if negative:
        raise _invalid({name: ["Must not be negative."] for name in sorted(negative)})


def _save(price: ModelPrice) -> ModelPrice:
    try:
        with transaction.atomic():
            price.save()
    except IntegrityError as exc:
        if "usage_modelprice_unique_model" in str(exc):
            raise _invalid(
                {"model": [f"The agency already has a price for {price.provider}/{price.model}."]},
                status=409,
            ) from exc
        raise
    return price


def _own(price: ModelPrice, verb: str) -> None:
    if price.agency_id is None:
        raise ApplicationError(
            "forbidden",
            f"Platform prices are {verb} in the admin, by the platform's superusers.",
            status=403,
        )


@transaction.atomic
def model_price_create(*, agency_id: uuid.UUID, **fields: Any) -> ModelPrice:
    """Precondition: in the agency's context."""
    _check(fields)
    return _save(ModelPrice(agency_id=agency_id, **fields))


@transaction.atomic
def model_price_update(*, price: ModelPrice, **fields: Any) -> ModelPrice:
    _own(price, "changed")
    _check(fields)
    for name, value in fields.items():
        setattr(price, name, value)
    return _save(price)


@transaction.atomic
def model_price_delete(*, price: ModelPrice) -> None:
    _own(price, "deleted")
    price.delete()
