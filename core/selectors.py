"""Reads that cross tenancy: membership lookups and by-id access that fails alike for
"missing" and "other agency"."""

from __future__ import annotations

import uuid

from django.apps import apps
from django.db.models import Model, QuerySet
from django.http import Http404

from core.models import Agency, AgencyOwnedModel, Membership, User


def access_object[M: AgencyOwnedModel](
    queryset: QuerySet[M], *, agency: Agency | None, id: uuid.UUID | str
) -> M:
    """Fetch one agency-owned row by id; another agency's row raises the same 404 as a missing one.

    ``agency=None`` means a platform-wide caller (a superuser). Row-level security already hides
    other agencies' rows; the explicit filter keeps code correct even on a connection without it.
    """
    filters: dict[str, object] = {"pk": id}
    if agency is not None:
        filters["agency"] = agency
    try:
        return queryset.get(**filters)
    except (queryset.model.DoesNotExist, ValueError, TypeError) as exc:
        raise Http404(f"No {queryset.model._meta.verbose_name} matches the given query.") from exc


def membership_for_user(*, user: User) -> Membership | None:
    """The user's membership. Needs a context with ``user_id`` or the agency set; the agency row
    itself is visible only once that agency is the tenant, so it is not joined here."""
    return Membership.objects.filter(user=user).first()


def agency_keys() -> list[tuple[type[Model], str]]:
    """(model, field) for every foreign key to :class:`Agency` of every installed model: the
    tables whose rows are an agency's (and go with it)."""
    return [
        (model, field.name)
        for model in apps.get_models()
        for field in model._meta.concrete_fields
        if field.remote_field is not None and field.remote_field.model is Agency
    ]


def agency_row_counts(*, agency_id: uuid.UUID) -> dict[type[Model], int]:
    """How many rows of each agency-owned model the agency has (models with none are absent).
    One COUNT per table. Precondition: the agency's context or the platform's."""
    counts = {
        model: model._default_manager.filter(**{name: agency_id}).count()
        for model, name in agency_keys()
    }
    return {model: n for model, n in counts.items() if n}
