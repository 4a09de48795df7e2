"""Work for a worker, sent to Celery by task name: now, or once the current transaction commits.

By name, not by importing the task: a task module imports the services that send it. Every task
of the project takes its tenant as TenantTask's ``agency_id`` keyword. A broker that refuses the
message is logged, never raised: what the caller changed is committed, and a periodic check
(beat's reaper, a timer sweep) sends the work again; each caller says which, in ``then``.
"""

from __future__ import annotations

import datetime
import functools
import logging
import uuid

from django.db import transaction
from kombu.exceptions import OperationalError as BrokerUnavailable

__all__ = ["send_task", "send_task_on_commit"]

logger = logging.getLogger(__name__)


def send_task(
    name: str,
    *args: str | uuid.UUID,
    agency_id: str | uuid.UUID,
    about: str,
    then: str,
    queue: str | None = None,
    eta: datetime.datetime | None = None,
) -> bool:
    """Send ``name(*args, agency_id=...)``; False, logged as ``"<about>: <name> not sent (...);
    <then>"``, when the broker refused it."""
    from config.celery_app import app  # noqa: PLC0415 - the Celery app loads the settings

    options: dict[str, object] = {}
    if queue:
        options["queue"] = queue
    if eta is not None:
        options["eta"] = eta
    try:
        app.send_task(
            name, args=[str(arg) for arg in args], kwargs={"agency_id": str(agency_id)}, **options
        )
    except BrokerUnavailable as exc:  # an outage: expected, and handled by ``then``
        logger.warning("%s: %s not sent (%s); %s", about, name, exc, then)
        return False
    except Exception:
        logger.exception("%s: %s not sent; %s", about, name, then)
        return False
    return True


def send_task_on_commit(
    name: str,
    *args: str | uuid.UUID,
    agency_id: str | uuid.UUID,
    about: str,
    then: str,
    queue: str | None = None,
    eta: datetime.datetime | None = None,
) -> None:
    """:func:`send_task` once the current transaction commits (at once outside of one)."""
    transaction.on_commit(
        functools.partial(
            send_task,
            name,
            *args,
            agency_id=agency_id,
            about=about,
            then=then,
            queue=queue,
            eta=eta,
        )
    )
