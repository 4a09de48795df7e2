"""Celery tasks of the platform core."""

from __future__ import annotations

from celery import shared_task

from core import tenancy


@shared_task(name="core.purge_idempotency_records", ignore_result=True)
def purge_idempotency_records() -> int:
    """Beat: answers to ``Idempotency-Key`` requests past their expiry (every agency)."""
    from core.api.idempotency import purge_expired_idempotency_records  # noqa: PLC0415

    with tenancy.platform_context():
        return purge_expired_idempotency_records()
