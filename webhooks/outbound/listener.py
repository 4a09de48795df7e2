"""The event bus's listener (``AGENTDESK_EVENT_RECORDED_LISTENERS``): an event recorded makes a
delivery for each active subscription that takes it, in the event's own transaction, and each
delivery's first attempt is sent to the ``notify`` queue once that transaction commits.

In the event's transaction, so that an event and its deliveries are committed together or not
at all (an outbox): a lost message is sent again by beat's sweep, a rolled-back run notifies
nobody. One statement whatever the number of subscriptions (none: it inserts nothing), answered
by the GIN index on ``event_types``; the POST itself never runs in the caller's transaction nor
holds a run's worker.
"""

from __future__ import annotations

import json
import uuid

from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection

from core.models import Event
from core.sending import send_task_on_commit
from webhooks.outbound.events import matching_entries

DELIVER_TASK = "webhooks.deliver"  # webhooks.outbound.tasks.deliver
AUTOMATIC, MANUAL = "automatic", "manual"
SWEEP_THEN = "beat's sweep sends it (AGENTDESK_OUTBOUND_WEBHOOK_SWEEP_SECONDS)"

_INSERT = """
INSERT INTO webhooks_delivery
    (id, agency_id, subscription_id, event_id, event_type, payload, status, attempts,
     next_attempt_at, last_error, created_at, updated_at)
SELECT gen_random_uuid(), s.agency_id, s.id, %s, %s, %s::jsonb, 'pending', 0,
       now(), '', now(), now()
FROM webhooks_subscription s
WHERE s.agency_id = %s AND s.is_active AND s.event_types && %s::varchar(200)[]
RETURNING id
"""


def body(event: Event) -> dict[str, object]:
    """What a subscriber receives (Standard Webhooks' ``type``, ``timestamp``, ``data``)."""
    return {
        "type": event.event_type,
        "timestamp": event.created_at.isoformat(),
        "data": {
            "event_id": str(event.id),
            "agency_id": str(event.agency_id),
            "source_module": event.source_module,
            "source_entity_type": event.source_entity_type,
            "source_entity_id": event.source_entity_id,
            "execution_id": str(event.source_execution_id) if event.source_execution_id else None,
            "payload": event.payload,
        },
    }


def event_recorded(event: Event) -> None:
    """Deliveries of ``event`` to the agency's active subscriptions that take it. Precondition:
    the event's agency context, inside the transaction that wrote it."""
    payload = json.dumps(body(event), cls=DjangoJSONEncoder)
    with connection.cursor() as cursor:
        cursor.execute(
            _INSERT,
            [
                event.id,
                event.event_type,
                payload,
                event.agency_id,
                matching_entries(event.event_type),
            ],
        )
        created: list[uuid.UUID] = [row[0] for row in cursor.fetchall()]
    for delivery_id in created:
        send_deliver_on_commit(delivery_id, event.agency_id)


def send_deliver_on_commit(
    delivery_id: uuid.UUID, agency_id: uuid.UUID, *, manual: bool = False
) -> None:
    """The delivery's due attempt (``manual``: one attempt now, whatever its state)."""
    send_task_on_commit(
        DELIVER_TASK,
        delivery_id,
        MANUAL if manual else AUTOMATIC,
        agency_id=agency_id,
        about=f"outbound webhook delivery {delivery_id}",
        then=SWEEP_THEN,
    )
