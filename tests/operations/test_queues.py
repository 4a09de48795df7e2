"""Queues per kind of work (config/queues.py, README "Queues"): every task of the project goes to
the queue of its kind, beat's entries and agents' cron ticks too; a queue the sender names wins;
every message says when it was sent, and ``/metrics`` has each queue's depth and the age of its
oldest waiting message; a backlog of embeddings and e-mails does not hold a run back."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from django.conf import settings
from django_celery_beat.models import PeriodicTask

from agents.models import Agent, ExecutionStatus
from agents.schedules import agent_schedule_sync, periodic_task_name
from agents.services import execution_create
from config import queues
from config.celery_app import app
from core import sending, tenancy
from core.beat import ModelEntry
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import by_turn, text_reply, tool_call_reply
from tests.agents.factories import AgentFactory
from tests.operations.test_metrics import scrape, value
from tests.processes import Worker, wait_for
from tools.ratelimit import get_redis

# The queue each kind of work must reach, whatever else the table says.
MUST = {
    "agents.run_execution": "runs",
    "agents.wake_execution": "runs",
    "agents.dispatch_event": "runs",
    "agents.run_scheduled": "runs",
    "teams.resume_parent": "runs",
    "tools.refresh_mcp_servers": "tools",
    "evals.judge_result": "tools",
    "memory.after_run": "memory",
    "memory.embed_pending": "memory",
    "approvals.notify_deciders": "notify",
    "tools.deliver_stranded_emails": "notify",
    "agents.purge_past_retention": "housekeeping",
    "core.purge_idempotency_records": "housekeeping",
}
AGE = "agentdesk_queue_oldest_age_seconds"


def _prefix() -> str:
    return str((app.conf.broker_transport_options or {}).get("global_keyprefix", ""))


def _oldest(key: str) -> bytes:
    """The oldest message of a Redis list of kombu's (it pushes at the head)."""
    raw = get_redis().lindex(key, -1)
    assert isinstance(raw, bytes), f"nothing in {key}"
    return raw


def test_every_task_of_the_project_goes_to_the_queue_of_its_kind() -> None:
    app.autodiscover_tasks(force=True)  # every app's tasks, as a worker imports them
    # Not Celery's own, nor the probes other test modules register (tests.*) when they share
    # this process.
    ours = sorted(name for name in app.tasks if not name.startswith(("celery.", "tests.")))
    unrouted = [name for name in ours if name not in queues.ROUTES]
    assert not unrouted, f"give these a queue in config/queues.py: {unrouted}"
    assert set(queues.ROUTES) <= set(ours), "config/queues.py routes tasks that do not exist"
    # As Celery routes a send that names no queue.
    routed = {name: app.amqp.router.route({}, name)["queue"].name for name in ours}
    assert routed == queues.ROUTES
    assert {name: routed[name] for name in MUST} == MUST
    assert set(routed.values()) == set(queues.NAMES)


def test_a_queue_the_sender_names_wins_and_the_message_says_when_it_was_sent() -> None:
    """A team's runs go to the queue its lead ran on (teams.services.limits.delivery_queue)."""
    queue = f"team-{uuid.uuid4().hex[:8]}"
    key = _prefix() + queue
    client = get_redis()
    before = time.time()
    try:
        sent = sending.send_task(
            "agents.run_execution", uuid.uuid4(), agency_id=uuid.uuid4(), about="t", then="-",
            queue=queue,
        )  # fmt: skip
        waiting, raw = client.llen(key), _oldest(key)
    finally:
        client.delete(key)
    assert sent
    assert waiting == 1
    headers = json.loads(raw)["headers"]
    assert headers["task"] == "agents.run_execution"
    assert before <= headers[queues.SENT_AT] <= time.time()


@pytest.mark.django_db
def test_beat_sends_its_entries_and_agents_cron_ticks_to_their_queues() -> None:
    """Each entry as beat's database scheduler holds it (a PeriodicTask row, no queue of its
    own) and sends it (celery.beat.Scheduler.apply_async), published to Redis under a key
    prefix of this test's own, where no worker takes it."""
    agent = AgentFactory.create(trigger_schedule="0 9 * * *", is_active=True)
    with tenancy.agency_context(agent.agency_id):
        agent_schedule_sync(agent)
    entries = [
        ModelEntry.from_entry(name, app=app, **entry)
        for name, entry in settings.CELERY_BEAT_SCHEDULE.items()
    ]
    entries.append(ModelEntry(PeriodicTask.objects.get(name=periodic_task_name(agent)), app=app))
    prefix = f"beat-check-{uuid.uuid4().hex[:8]}:"
    client = get_redis()
    try:
        with app.connection_for_write(transport_options={"global_keyprefix": prefix}) as conn:
            producer = conn.Producer()
            for entry in entries:  # as celery.beat.Scheduler.apply_async sends it
                options = {**entry.options, "headers": {"celery_beat_task": True}}
                task = app.tasks.get(entry.task)
                if task is not None:
                    task.apply_async(entry.args, entry.kwargs, producer=producer, **options)
                else:
                    app.send_task(
                        entry.task, entry.args, entry.kwargs, producer=producer, **options
                    )
        landed = {
            json.loads(raw)["headers"]["task"]: queue
            for queue in queues.NAMES
            for raw in client.lrange(prefix + queue, 0, -1)
        }
    finally:
        keys = list(client.scan_iter(match=f"{prefix}*"))
        if keys:
            client.delete(*keys)
    expected = {entry.task: queues.ROUTES[entry.task] for entry in entries}
    assert landed == expected
    assert landed["agents.run_scheduled"] == "runs"
    assert landed["agents.reap_expired_leases"] == "runs"
    assert landed["memory.consolidate_all"] == "memory"
    assert landed["flow.detect_stuck_runs"] == "housekeeping"


@pytest.fixture
def private_queues(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Queues of this test's own in place of the platform's (the suite's worker takes those)."""
    names = {name: f"{name}-{uuid.uuid4().hex[:8]}" for name in queues.NAMES}
    monkeypatch.setitem(app.conf, "task_queues", {names[name]: {} for name in queues.NAMES})
    monkeypatch.setitem(app.conf, "task_default_queue", names[queues.DEFAULT])
    for task, queue in list(queues.ROUTES.items()):
        monkeypatch.setitem(queues.ROUTES, task, names[queue])
    return names


@pytest.fixture
def cleaned(private_queues: dict[str, str]) -> Iterator[None]:
    yield
    client = get_redis()
    for queue in private_queues.values():
        keys = list(client.scan_iter(match=f"{_prefix()}{queue}*"))
        if keys:
            client.delete(*keys)


def test_the_scrape_has_each_queues_depth_and_its_oldest_messages_age(
    private_queues: dict[str, str], cleaned: None
) -> None:
    memory, notify = private_queues["memory"], private_queues["notify"]
    client = get_redis()
    for _ in range(2):
        app.send_task("memory.embed_pending", kwargs={"agency_id": str(uuid.uuid4())})
    # One sent 5 minutes ago at another priority (its own list): the oldest of the queue.
    message = json.loads(_oldest(_prefix() + memory))
    old = time.time() - 300
    message["headers"][queues.SENT_AT] = old
    client.lpush(f"{_prefix()}{memory}\x06\x169", json.dumps(message))
    # One sent by a process that does not stamp its messages: counted, its age unknown.
    message["headers"].pop(queues.SENT_AT)
    client.lpush(_prefix() + notify, json.dumps(message))

    samples = scrape()
    after = time.time()

    assert value(samples, "agentdesk_scrape_source_up", source="redis") == 1
    assert value(samples, "agentdesk_queue_depth", queue=memory) == 3
    assert 300 <= value(samples, AGE, queue=memory) <= after - old
    assert value(samples, "agentdesk_queue_depth", queue=notify) == 1
    assert not [key for key in samples if key[0] == AGE and ("queue", notify) in key[1]]
    for kind in ("runs", "tools", "housekeeping"):
        assert ("agentdesk_queue_depth", frozenset({("queue", private_queues[kind])})) in samples
        assert value(samples, AGE, queue=private_queues[kind]) == 0


@pytest.mark.slow
def test_a_backlog_of_embeddings_and_e_mails_does_not_hold_a_run_back(
    private_queues: dict[str, str],
    cleaned: None,
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
) -> None:
    """A worker of the runs queue alone (a cluster's runs deployment) runs a run the platform
    sends while the memory and notify queues hold a thousand messages each, which it leaves."""
    backlog = 1000
    client = get_redis()
    for task, kind in (("memory.embed_pending", "memory"), ("approvals.notify_deciders", "notify")):
        app.send_task(task, kwargs={"agency_id": str(uuid.uuid4())})
        key = _prefix() + private_queues[kind]
        client.lpush(key, *[_oldest(key)] * (backlog - 1))
    agent = make_agent(allowed_tools=["crm_*"])
    fake_llm_server.set_responder(
        by_turn(tool_call_reply("crm_search_contacts", {"query": "Ada"}), text_reply("None.")),
        key=agent.llm_model,
    )
    worker = Worker(queue=private_queues["runs"], concurrency=2).start()
    try:
        with tenancy.agency_context(agent.agency_id):
            execution = execution_create(agent=agent, input="Find Ada.")
        assert execution is not None
        ended = wait_for(execution)
    finally:
        worker.stop()
    assert ended.status == ExecutionStatus.COMPLETED, worker.output()[-3000:]
    assert (ended.llm_call_count, ended.tool_call_count) == (2, 1)
    for kind in ("memory", "notify"):
        assert client.llen(_prefix() + private_queues[kind]) == backlog
