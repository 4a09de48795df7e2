"""URLs of admin pages and the events an agency has emitted."""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models import Model
from django.urls import NoReverseMatch, reverse

from core import tenancy
from core.models import Event


def admin_url(model: type[Model] | Model, action: str, *args: Any) -> str:
    opts = model._meta
    return reverse(f"admin:{opts.app_label}_{opts.model_name}_{action}", args=args)


def add_page(model: type[Model]) -> tuple[str, int]:
    """The add page's URL, and how it answers when adding is not allowed: 403; an admin with no
    add page (rows never added by hand: evals' experiments and dataset versions) has none, and
    the address it would have ends in a 404 (follow its redirect)."""
    try:
        return admin_url(model, "add"), 403
    except NoReverseMatch:
        return f"{admin_url(model, 'changelist')}add/", 404


def change_url(obj: Model) -> str:
    return admin_url(obj, "change", obj.pk)


def events(agency_id: uuid.UUID) -> list[str]:
    with tenancy.platform_context():
        return list(
            Event.objects.filter(agency_id=agency_id)
            .order_by("created_at")
            .values_list("event_type", flat=True)
        )
