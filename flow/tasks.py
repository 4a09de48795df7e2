"""Celery tasks of flow analysis: beat's stuck detection and completeness sweep, and the stuck
run's e-mail to the agency's deciders."""

from __future__ import annotations

import logging

from celery import shared_task

from core.tenancy import TenantTask
from flow import completeness, stuck
from flow.models import StuckRun

logger = logging.getLogger(__name__)


@shared_task(name="flow.detect_stuck_runs", ignore_result=True)
def detect_stuck_runs() -> int:
    """Beat: flag (and escalate) runs in one state longer than expected (flow/stuck.py)."""
    flagged = stuck.detect()
    if flagged:
        logger.info("flagged %d stuck run(s)", flagged)
    return flagged


@shared_task(name="flow.analyse_finished_runs", ignore_result=True)
def analyse_finished_runs() -> int:
    """Beat: the completeness analysis of runs that ended since the last sweep."""
    return completeness.analyse_finished()


@shared_task(name=stuck.NOTIFY_TASK, base=TenantTask, ignore_result=True)
def notify_stuck(stuck_id: str) -> int:
    found = StuckRun.objects.select_related("agent").filter(pk=stuck_id).first()
    return 0 if found is None else stuck.send_stuck_emails(found)
