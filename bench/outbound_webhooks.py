"""What outbound webhooks add to recording an event (issue 31: "step overhead unchanged").

A run's steps record no event of their own; a run records two (``ai.execution.started`` and
``.completed`` / ``.failed``), a CRM-writing tool one. What the outbound webhooks' listener adds
to each is one statement in the event's transaction (``INSERT ... SELECT`` over the agency's
active subscriptions that take the type: none for most agencies). Measured here in one process,
on this run's own database: ``event_emit`` as the runtime calls it, in the agency's context,
timed without the commit (the same with and without the listener, and the noisiest part), the
settings taking turns event by event: the listener off, on for an agency with no subscription,
on for an agency whose one subscription takes other types. Per setting: the median over batches
of each batch's p50 per event, and the ratios to off; with the machine's round trip and durable
commit of the same run.

    .venv/bin/python -m bench.outbound_webhooks [--events 300] [--repeat 8]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from typing import Any
from unittest import mock

from django.test import override_settings

from bench import common
from core import events as events_module
from core import tenancy
from core.events import event_emit
from tests.factories import AgencyFactory
from webhooks.outbound.listener import event_recorded
from webhooks.outbound.services import subscription_create

SETTINGS = ("off", "on, no subscription", "on, one other subscription")
LISTENER = (event_recorded,)


def _interleaved(setups: list[tuple[tuple[Any, ...], Any]], events: int) -> list[float]:
    """p50 ms of recording one event under each setup, the setups taking turns event by event
    (so that the machine's drift falls on all alike), each in its agency's one transaction."""
    times: list[list[float]] = [[] for _ in setups]
    for _ in range(events):
        for index, (listeners, agency_id) in enumerate(setups):
            with (
                tenancy.agency_context(agency_id),
                mock.patch.object(
                    events_module, "event_recorded_listeners", lambda found=listeners: found
                ),
            ):
                started = time.perf_counter()
                event_emit(agency_id=agency_id, event_type="ai.execution.completed")
                times[index].append((time.perf_counter() - started) * 1000)
    return [statistics.median(t) for t in times]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=8)
    args = parser.parse_args()
    common.create_database()
    try:
        facts = common.machine_facts()
        plain, subscribed = AgencyFactory.create(), AgencyFactory.create()
        with (
            tenancy.agency_context(subscribed.id),
            override_settings(
                AGENTDESK_OUTBOUND_WEBHOOK_ALLOW_HTTP=True,
                AGENTDESK_OUTBOUND_WEBHOOK_PRIVATE_NETWORKS=["127.0.0.0/8"],
            ),
        ):
            subscription_create(
                agency_id=subscribed.id,
                name="ops",
                url="http://127.0.0.1:9/",
                event_types=["ai.approval.requested"],
            )
        setups = [((), plain.id), (LISTENER, plain.id), (LISTENER, subscribed.id)]
        _interleaved(setups, 50)  # warm-up: connections, caches
        runs: dict[str, list[float]] = {name: [] for name in SETTINGS}
        for _ in range(args.repeat):
            for name, p50 in zip(SETTINGS, _interleaved(setups, args.events), strict=True):
                runs[name].append(p50)
        medians = {name: statistics.median(values) for name, values in runs.items()}
        report = {
            "machine": facts.as_dict(),
            "load_average": os.getloadavg(),
            "events_per_batch": args.events,
            "batches": args.repeat,
            "per_event_p50_ms_median": {k: round(v, 4) for k, v in medians.items()},
            "ratio_to_off": {k: round(v / medians["off"], 3) for k, v in medians.items()},
            "added_ms": {k: round(v - medians["off"], 4) for k, v in medians.items()},
            "per_batch": {k: [round(v, 4) for v in values] for k, values in runs.items()},
        }
        print(json.dumps(report, indent=2))
    finally:
        common.drop_database()


if __name__ == "__main__":
    main()
