"""After-run work (agents/after_run.py): recorded in the transaction that ends a run and sent once
it commits; a task deletes its row when its work is done, is retried when the database or the
broker fails under it, and leaves the row when another delivery is at the work; beat's reaper
sends again what is past its due time, at most MAX_SENDS times. (Outages with a real worker:
tests/operations/test_after_run_outage.py.)

What is sent is read from Celery's own publish signal; the message stops at the broker's door,
so that a worker other tests left running does not take it."""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from celery.signals import after_task_publish
from django.db import OperationalError
from django.utils import timezone
from kombu import Producer

from agents import after_run
from agents.models import AfterRunWork, Execution, ExecutionStatus
from agents.services import execution_cancel
from core import tenancy
from tests.agents.factories import AfterRunWorkFactory, ExecutionFactory

pytestmark = pytest.mark.django_db
PROBE = "tests.after_run_probe"
# What the probe task does at each call: raise the exception, or return the text.
probe_script: list[BaseException | str] = []


@after_run.task(PROBE)
def probe(execution_id: str, *, agency_id: str) -> str:
    step = probe_script.pop(0)
    if isinstance(step, BaseException):
        raise step
    return step


@pytest.fixture
def published() -> Iterator[list[tuple[str, str]]]:
    """(task name, execution id) of every message this process publishes from now on."""
    sent: list[tuple[str, str]] = []

    def record(sender: Any = None, body: Any = None, **kwargs: Any) -> None:
        args, _kwargs, _embed = body  # protocol 2
        sent.append((str(sender), str(args[0]) if args else ""))

    after_task_publish.connect(record, weak=False)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Producer, "publish", lambda self, *args, **kwargs: None)
        yield sent
    after_task_publish.disconnect(record)


def _row(execution: Execution, task: str = "memory.after_run") -> AfterRunWork | None:
    with tenancy.platform_context():
        return AfterRunWork.objects.filter(execution_id=execution.pk, task=task).first()


def test_a_run_that_ends_records_its_after_run_work_with_its_end_and_sends_it_on_commit(
    published: list[tuple[str, str]], django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    execution = ExecutionFactory.create(status=ExecutionStatus.PENDING)
    before = timezone.now()
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        with tenancy.agency_context(execution.agency_id):
            execution_cancel(execution=execution)
        row = _row(execution)
        assert row is not None  # written by the ending transaction, before anything is sent
        assert published == []
    assert row.agency_id == execution.agency_id
    assert row.sends == 1
    period = datetime.timedelta(seconds=120)
    assert before + period <= row.due_at <= timezone.now() + period
    for callback in callbacks:
        callback()
    assert published.count(("memory.after_run", str(execution.pk))) == 1


def test_the_reaper_sends_again_work_past_its_due_time_once_per_period_at_most_max_sends_times(
    published: list[tuple[str, str]],
) -> None:
    now = timezone.now()
    due = AfterRunWorkFactory.create(due_at=now - datetime.timedelta(seconds=1))
    later = AfterRunWorkFactory.create(due_at=now + datetime.timedelta(seconds=30))
    given_up = AfterRunWorkFactory.create(
        due_at=now - datetime.timedelta(hours=1), sends=after_run.MAX_SENDS
    )

    assert after_run.send_again(now) == 1
    assert published == [("memory.after_run", str(due.execution_id))]
    row = _row(due.execution)
    assert row is not None
    assert row.sends == 2
    assert row.due_at == now + datetime.timedelta(seconds=120)
    assert after_run.send_again(now) == 0  # once per period

    # After a broker restart (a later tick), everything owed is sent at once, whatever its due
    # time (but not what was given up on).
    published.clear()
    assert after_run.send_again(now + datetime.timedelta(seconds=10), everything=True) == 2
    assert sorted(published) == sorted(
        ("memory.after_run", str(r.execution_id)) for r in (due, later)
    )
    assert _row(given_up.execution) is not None


def test_an_after_run_task_deletes_its_row_when_done_and_is_retried_through_an_outage() -> None:
    row = AfterRunWorkFactory.create(task=PROBE)
    execution_id, agency_id = str(row.execution_id), str(row.agency_id)
    probe_script[:] = [OperationalError("the connection is lost"), "done"]

    result = probe.apply(args=[execution_id], kwargs={"agency_id": agency_id})

    assert result.get() == "done"  # the second attempt
    assert probe_script == []
    assert _row(row.execution, PROBE) is None


def test_an_after_run_task_leaves_its_row_when_another_delivery_is_at_the_work() -> None:
    row = AfterRunWorkFactory.create(task=PROBE)
    probe_script[:] = [after_run.Busy("its episode is being completed")]

    probe.apply(args=[str(row.execution_id)], kwargs={"agency_id": str(row.agency_id)})

    assert _row(row.execution, PROBE) is not None  # the reaper sends it again if that one fails
