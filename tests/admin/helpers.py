"""URLs of admin pages and the events an agency has emitted."""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models import Model
from django.urls import reverse

from core import tenancy
from core.models import Event


def admin_url(model: type[Model] | Model, action: str, *args: Any) -> str:
    opts = model._meta
    return reverse(f"admin:{opts.app_label}_{opts.model_name}_{action}", args=args)


def change_url(obj: Model) -> str:
    return admin_url(obj, "change", obj.pk)


def events(agency_id: uuid.UUID) -> list[str]:
    with tenancy.platform_context():
        return list(
            Event.objects.filter(agency_id=agency_id)
            .order_by("created_at")
            .values_list("event_type", flat=True)
        )
