"""``GET /metrics``: after real runs on real worker processes, the web process's scrape has the
counters with the right values, summed over every process (prometheus-client's multiprocess
mode); scraping is refused without the token or an allowed address; the gauges read at scrape
time (people waiting, queue depth) are there, and left out — not failed — when their source does
not answer; a scrape needs no database session or tenant."""

from __future__ import annotations

import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import OperationalError
from django.test import Client
from django.test.utils import override_settings
from prometheus_client.mmap_dict import MmapedDict
from prometheus_client.parser import text_string_to_metric_families

from agents.models import Agent, ExecutionStatus, StopReason
from agents.services import execution_create
from approvals.services import approval_decide
from core import tenancy
from crm.models import Contact
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import by_turn, text_reply, tool_call_reply
from ops import metrics
from ops.metrics import exposition
from tests.agents.factories import ExecutionFactory
from tests.approvals.factories import ApprovalFactory
from tests.processes import AsgiServer, Worker, wait_for
from tests.tools.factories import ToolCallFactory
from tools.models import ToolCallStatus

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]

RUNS = 4
# Each run: look a contact up, call a tool it was not offered, answer. Tokens per reply as
# scripted (input, output).
SCRIPT_TOKENS = [(100, 7), (120, 9), (150, 11)]


def parse(text: str) -> Samples:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` whose labels include ``labels`` (0 when none)."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= ls)


def scrape(client: Client | None = None, **headers: Any) -> Samples:
    response = (client or Client()).get("/metrics", **headers)
    assert response.status_code == 200, response.content
    return parse(response.content.decode())


def _agent_with_script(make_agent: Callable[..., Agent], server: FakeProviderServer) -> Agent:
    agent = make_agent("openai")
    with tenancy.agency_context(agent.agency_id):
        Contact.objects.create(agency_id=agent.agency_id, first_name="Ada", email="ada@x.io")
    (lookup_in, lookup_out), (other_in, other_out), (final_in, final_out) = SCRIPT_TOKENS
    server.set_responder(
        by_turn(
            tool_call_reply(
                "crm_get_contact",
                {"email": "ada@x.io"},
                input_tokens=lookup_in,
                output_tokens=lookup_out,
            ),
            tool_call_reply("no_such_tool", {}, input_tokens=other_in, output_tokens=other_out),
            text_reply("Done.", input_tokens=final_in, output_tokens=final_out),
        ),
        key=agent.llm_model,
    )
    return agent


@pytest.fixture
def private_metrics(tmp_path: Path) -> Iterator[Path]:
    """A metrics directory of this test's own processes only (exact counts)."""
    path = tmp_path / "prometheus"
    path.mkdir()
    with override_settings(PROMETHEUS_MULTIPROC_DIR=str(path)):
        yield path


@pytest.mark.slow
def test_metrics_after_runs_on_two_worker_processes_are_summed_in_the_web_scrape(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    private_metrics: Path,
) -> None:
    queue = f"metrics-{uuid.uuid4().hex[:8]}"
    env: dict[str, Any] = {"PROMETHEUS_MULTIPROC_DIR": str(private_metrics)}
    workers = [Worker(queue=queue, concurrency=2, **env).start() for _ in range(2)]
    web = AsgiServer(**env).start()
    try:
        agent = _agent_with_script(make_agent, fake_llm_server)
        executions = []
        for _ in range(RUNS):
            with tenancy.agency_context(agent.agency_id):
                execution = execution_create(agent=agent, input="Look Ada up.", queue=queue)
            assert execution is not None
            executions.append(execution)
        for execution in executions:
            done = wait_for(execution)
            assert done.status == ExecutionStatus.COMPLETED, done.error
        # A delivery's figures are recorded when it ends, just after its run's last commit:
        # scraped until every delivery has ended (a busy machine leaves a gap between the two).
        deadline = time.monotonic() + 60
        while True:
            with urllib.request.urlopen(f"{web.url}/metrics", timeout=10) as response:
                assert response.status == 200
                assert response.headers["Cache-Control"].startswith("max-age=0")
                samples = parse(response.read().decode())
            in_progress = value(samples, "agentdesk_run_deliveries_in_progress")
            if in_progress == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        worker_pids = {w.process.pid for w in workers if w.process is not None}
        files = sorted(private_metrics.glob("*.db"))
    finally:
        web.stop()
        for worker in workers:
            worker.stop()

    runs = {"agent_type": agent.agent_type}
    assert value(samples, "agentdesk_runs_started_total", **runs, trigger="manual") == RUNS
    assert value(samples, "agentdesk_runs_started_total") == RUNS
    completed = {"status": "completed", "stop_reason": StopReason.FINAL_ANSWER}
    assert value(samples, "agentdesk_runs_finished_total", **runs, **completed) == RUNS
    assert value(samples, "agentdesk_runs_finished_total") == RUNS
    assert value(samples, "agentdesk_run_duration_seconds_count", status="completed") == RUNS
    assert value(samples, "agentdesk_run_deliveries_in_progress") == 0

    tool = "crm_get_contact"
    assert value(samples, "agentdesk_tool_calls_total", tool=tool, outcome="completed") == RUNS
    # A name the model made up is not a label: every such call counts as "not_offered".
    not_offered = {"tool": "not_offered"}
    assert value(samples, "agentdesk_tool_calls_total", **not_offered, outcome="denied") == RUNS
    assert (
        value(samples, "agentdesk_tool_errors_total", **not_offered, code="tool_not_allowed")
        == RUNS
    )
    assert value(samples, "agentdesk_tool_calls_total") == 2 * RUNS
    assert not any("no_such_tool" in str(key) for key in samples)

    model = {"provider": "openai", "model": agent.llm_model}
    replies = len(SCRIPT_TOKENS)
    expected_in = RUNS * sum(i for i, _ in SCRIPT_TOKENS)
    expected_out = RUNS * sum(o for _, o in SCRIPT_TOKENS)
    assert value(samples, "agentdesk_model_tokens_total", **model, kind="input") == expected_in
    assert value(samples, "agentdesk_model_tokens_total", **model, kind="output") == expected_out
    assert value(samples, "agentdesk_model_call_duration_seconds_count", **model) == RUNS * replies
    assert value(samples, "agentdesk_step_duration_seconds_count", step_type="think") == (
        RUNS * replies
    )
    assert value(samples, "agentdesk_step_duration_seconds_count", step_type="act") == RUNS * 2
    # Read by the web process at scrape time.
    assert value(samples, "agentdesk_scrape_source_up", source="database") == 1
    assert value(samples, "agentdesk_scrape_source_up", source="redis") == 1
    assert ("agentdesk_approvals_waiting", frozenset()) in samples
    assert any(name == "agentdesk_queue_depth" for name, _ in samples)

    # Every count came from the worker processes' files (the web counted nothing); no execution
    # or agency id is a label.
    # (A counter without labels starts at 0 in every process's file: only counts that are not.)
    counted = {
        int(f.stem.rsplit("-", 1)[1])
        for f in files
        if not f.name.startswith("gauge")
        and any(v for _, v, _, _ in MmapedDict.read_all_values_from_file(str(f)))
    }
    assert counted, files
    assert counted <= worker_pids, (counted, worker_pids)
    labels = {v for _, ls in samples for _, v in ls}
    assert not labels & ({str(e.id) for e in executions} | {str(agent.agency_id)})

    # Stopped, the workers gave their live gauges back (Celery's shutdown signal); the web
    # server's exit skips atexit (uvicorn re-raises SIGTERM), so the next scrape sweeps its gauge
    # file. The workers' counters stay in the totals.
    live = {int(f.stem.rsplit("-", 1)[1]) for f in private_metrics.glob("gauge_live*.db")}
    assert not live & worker_pids
    assert value(scrape(), "agentdesk_runs_finished_total") == RUNS
    assert not list(private_metrics.glob("gauge_live*.db"))


@pytest.mark.django_db
@override_settings(AGENTDESK_METRICS_TOKEN="s3cret-token")
def test_scrape_needs_the_token_or_an_allowed_address() -> None:
    client = Client()
    wrong = client.get("/metrics", HTTP_AUTHORIZATION="Bearer not-the-token")
    assert wrong.status_code == 401
    assert wrong["WWW-Authenticate"].startswith("Bearer")
    # A wrong token is refused even from an allowed address (loopback is the test client's).
    assert client.get("/metrics", HTTP_AUTHORIZATION="Basic czNjcmV0").status_code == 401
    outside = "203.0.113.9"
    assert client.get("/metrics", REMOTE_ADDR=outside).status_code == 401  # a token would do
    token = "Bearer s3cret-token"
    assert client.get("/metrics", HTTP_AUTHORIZATION=token, REMOTE_ADDR=outside).status_code == 200
    assert client.get("/metrics").status_code == 200  # loopback, no token
    assert client.post("/metrics").status_code == 405


@pytest.mark.django_db
@override_settings(AGENTDESK_METRICS_TOKEN="", AGENTDESK_METRICS_ALLOWED_IPS=["10.0.0.0/8"])
def test_scrape_from_an_address_not_allowed_is_forbidden() -> None:
    client = Client()
    assert client.get("/metrics").status_code == 403  # loopback is no longer on the list
    assert client.get("/metrics", REMOTE_ADDR="203.0.113.9").status_code == 403
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer anything").status_code == 401
    response = client.get("/metrics", REMOTE_ADDR="10.1.2.3")
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]


def test_a_scrape_makes_no_query_for_the_counters(
    django_assert_num_queries: Any, monkeypatch: pytest.MonkeyPatch, admin_client: Client
) -> None:
    """Answered before the session, user and tenant middleware: with the scrape-time readers
    stubbed, not one query, even with a logged-in session."""
    people = {"approvals": exposition.Waiting(2, 30.0), "questions": exposition.Waiting(0, 0.0)}
    monkeypatch.setattr(exposition, "_waiting_for_people", lambda: people)
    with django_assert_num_queries(0):
        samples = scrape(admin_client)
    assert value(samples, "agentdesk_approvals_waiting") == 2
    assert value(samples, "agentdesk_approvals_waiting_oldest_age_seconds") == 30.0


def test_a_database_that_does_not_answer_leaves_its_gauges_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def down() -> None:
        raise OperationalError("connection refused")

    def slow() -> None:
        time.sleep(5)

    monkeypatch.setattr(exposition, "_waiting_for_people", down)
    samples = scrape()
    assert value(samples, "agentdesk_scrape_source_up", source="database") == 0
    assert not any(name.startswith("agentdesk_approvals_waiting") for name, _ in samples)
    assert ("agentdesk_run_deliveries_in_progress", frozenset()) in samples  # the rest is there

    monkeypatch.setattr(exposition, "_waiting_for_people", slow)
    started = time.monotonic()
    with override_settings(AGENTDESK_METRICS_QUERY_TIMEOUT_SECONDS=0.3):
        samples = scrape()
    assert time.monotonic() - started < 2
    assert value(samples, "agentdesk_scrape_source_up", source="database") == 0


def test_waiting_approvals_and_questions_are_counted_at_scrape_time_across_agencies(
    live_db: None,
) -> None:
    before = scrape()
    execution = ExecutionFactory.create(status=ExecutionStatus.WAITING_APPROVAL)
    call = ToolCallFactory.create(execution=execution, status=ToolCallStatus.WAITING_APPROVAL)
    approval = ApprovalFactory.create(tool_call=call)
    other = ApprovalFactory.create()  # another agency's
    waiting = scrape()
    assert value(waiting, "agentdesk_approvals_waiting") == (
        value(before, "agentdesk_approvals_waiting") + 2
    )
    assert value(waiting, "agentdesk_approvals_waiting_oldest_age_seconds") >= 0
    assert value(waiting, "agentdesk_scrape_source_up", source="database") == 1

    # Denied: the run ends cancelled (counted once the decision commits) and waits no more.
    with tenancy.agency_context(execution.agency_id):
        approval_decide(approval=approval, approve=False, user_id=None, reason="no")
    after = scrape()
    denied = {"status": "cancelled", "stop_reason": StopReason.APPROVAL_DENIED}
    assert value(after, "agentdesk_approvals_resolved_total", outcome="denied") == (
        value(waiting, "agentdesk_approvals_resolved_total", outcome="denied") + 1
    )
    assert value(after, "agentdesk_runs_finished_total", **denied) == (
        value(waiting, "agentdesk_runs_finished_total", **denied) + 1
    )
    assert value(after, "agentdesk_approvals_waiting") == (
        value(waiting, "agentdesk_approvals_waiting") - 1
    )
    assert other.status == "pending"


def test_queue_depth_is_the_default_queue_at_every_priority(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from config.celery_app import app
    from tools.ratelimit import get_redis

    queue = f"metrics-depth-{uuid.uuid4().hex[:8]}"
    monkeypatch.setitem(app.conf, "task_default_queue", queue)
    prefix = str((app.conf.broker_transport_options or {}).get("global_keyprefix", ""))
    client = get_redis()
    keys = [prefix + queue, prefix + queue + "\x06\x163"]
    try:
        client.lpush(keys[0], "a", "b", "c")
        client.lpush(keys[1], "d")
        samples = scrape()
    finally:
        client.delete(*keys)
    assert value(samples, "agentdesk_queue_depth", queue=queue) == 4


def test_the_reaper_counts_the_runs_of_lost_workers_it_delivers_again(live_db: None) -> None:
    import datetime

    from django.utils import timezone

    from agents.tasks import reap_expired_leases
    from tests.agents.factories import ExecutionFactory

    lost = ExecutionFactory.create(
        status=ExecutionStatus.RUNNING,
        lease_owner="gone-host:1:1",
        lease_expires_at=timezone.now() - datetime.timedelta(minutes=5),
        started_at=timezone.now() - datetime.timedelta(minutes=10),
    )
    before = scrape()
    reap_expired_leases()
    after = scrape()
    name = "agentdesk_reaper_redeliveries_total"
    assert value(after, name, kind="worker_lost") - value(before, name, kind="worker_lost") >= 1
    with tenancy.agency_context(lost.agency_id):
        lost.refresh_from_db()
    # Released for a new delivery (which a worker of this suite may already have claimed).
    assert lost.lease_owner != "gone-host:1:1"


def test_reaper_redeliveries_are_counted_by_kind() -> None:
    before = scrape()
    metrics.reaper_redelivered(worker_lost=2, pending=0, timer_due=1, event=0)
    metrics.reaper_redelivered("worker_lost", 1)
    after = scrape()

    def delta(kind: str) -> float:
        name = "agentdesk_reaper_redeliveries_total"
        return value(after, name, kind=kind) - value(before, name, kind=kind)

    assert delta("worker_lost") == 3
    assert delta("timer_due") == 1
    assert delta("pending") == 0


def test_the_grafana_dashboard_uses_only_metrics_the_platform_exports() -> None:
    import json
    import re

    from ops.metrics import definitions

    dashboard = json.loads(
        (Path(__file__).parents[2] / "docs" / "grafana-dashboard.json").read_text()
    )
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    used = {name for expr in exprs for name in re.findall(r"agentdesk_[a-z_]+", expr)}
    recorded = {
        metric._name
        for metric in vars(definitions).values()
        if hasattr(metric, "_name") and hasattr(metric, "_type")
    }
    suffixes = ("_total", "_bucket", "_count", "_sum")
    scrape_time = {
        "agentdesk_approvals_waiting",
        "agentdesk_approvals_waiting_oldest_age_seconds",
        "agentdesk_questions_waiting",
        "agentdesk_questions_waiting_oldest_age_seconds",
        "agentdesk_queue_depth",
        "agentdesk_queue_oldest_age_seconds",
        "agentdesk_scrape_source_up",
    }
    for name in used:
        base = next((name.removesuffix(s) for s in suffixes if name.endswith(s)), name)
        assert base in recorded | scrape_time, name
    panels = {panel["title"] for panel in dashboard["panels"]}
    assert {
        "Queue depth",
        "Oldest message waiting per queue",
        "Approvals waiting",
        "Model call latency p50 / p95",
    } <= panels


def test_a_platform_start_removes_the_samples_of_its_last_run_only(tmp_path: Path) -> None:
    import os

    from ops.metrics import multiprocess

    host = multiprocess.process_identifier().rsplit("-", 1)[0]
    gone = 2**22 + 12345  # above the kernel's default pid_max: never a running process
    live = os.getpid()
    names = [
        f"counter_{host}-{gone}.db",
        f"gauge_livesum_{host}-{gone}.db",
        f"counter_{host}-{live}.db",  # a process still running keeps its samples
        f"counter_otherhost-{gone}.db",  # another container's: its liveness is unknown here
        "notes.txt",
    ]
    for name in names:
        (tmp_path / name).write_bytes(b"")
    assert multiprocess.reset(tmp_path) == tmp_path
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names[2:])
    assert multiprocess.reset(tmp_path / "new").is_dir()


# --- recorded by the runtime in this process (the run's thread), read back by a scrape ---------
def own_scrape() -> Samples:
    """What this test process recorded: its own files of the metrics directory only, so that
    runs other tests left to the suite's shared worker (it writes to the same directory) cannot
    add to the counts."""
    from prometheus_client.multiprocess import MultiProcessCollector

    from ops.metrics import multiprocess

    directory = Path(settings.PROMETHEUS_MULTIPROC_DIR)
    files = [str(f) for f in directory.glob(f"*_{multiprocess.process_identifier()}.db")]
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in MultiProcessCollector.merge(files, accumulate=True)
        for sample in family.samples
    }


def _delta(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


def test_a_run_refused_by_the_budget_counts_a_refusal_and_a_budget_exceeded_end(
    make_agent: Callable[..., Agent], fake_llm_server: FakeProviderServer
) -> None:
    from decimal import Decimal

    from agents.runtime import loop
    from tests.processes import pending_execution
    from tests.usage.factories import BudgetFactory, ModelPriceFactory

    agent = make_agent("openai")
    fake_llm_server.set_responder(by_turn(text_reply("Hi.")), key=agent.llm_model)
    with tenancy.agency_context(agent.agency_id):
        ModelPriceFactory.create(agency=agent.agency, model=agent.llm_model)
        BudgetFactory.create(agency=agent.agency, limit_usd=Decimal("0.000001"))
    execution = pending_execution(agent, input_text="Spend.")
    before = own_scrape()
    assert loop.run_execution(execution.id, agency_id=agent.agency_id) == "failed"
    after = own_scrape()
    assert _delta(before, after, "agentdesk_budget_refusals_total", stage="model_call") == 1
    ended = {"status": "failed", "stop_reason": StopReason.BUDGET_EXCEEDED}
    assert _delta(before, after, "agentdesk_runs_finished_total", **ended) == 1
    assert _delta(before, after, "agentdesk_runs_started_total", trigger="manual") == 1
    assert value(after, "agentdesk_model_call_duration_seconds_count", model=agent.llm_model) == 0


def test_a_run_parked_by_the_providers_rate_limit_counts_a_park(
    make_agent: Callable[..., Agent], fake_llm_server: FakeProviderServer
) -> None:
    from agents.models import LLMProvider
    from agents.runtime import loop
    from agents.runtime.provider_limits import KEY_PREFIX
    from tests.processes import pending_execution
    from tools.ratelimit import get_redis

    agent = make_agent("openai", allowed_tools=["crm_search_contacts"])
    fake_llm_server.set_responder(
        by_turn(tool_call_reply("crm_search_contacts", {"query": "ada"}), text_reply("None.")),
        key=agent.llm_model,
    )
    with tenancy.agency_context(agent.agency_id):
        provider = LLMProvider.objects.get(agency_id=agent.agency_id)
        provider.requests_per_minute = 1
        provider.save()
    # This minute and the next start full: the run's first call is already refused.
    client = get_redis()
    minute = int(time.time()) // 60 * 60
    keys = [f"{KEY_PREFIX}:{provider.id}:requests:{m}" for m in (minute, minute + 60)]
    for key in keys:
        client.set(key, 1, ex=125)
    execution = pending_execution(agent, input_text="Look.")
    before = own_scrape()
    try:
        outcome = loop.run_execution(execution.id, agency_id=agent.agency_id)
    finally:
        client.delete(*keys)
    after = own_scrape()
    assert outcome == ExecutionStatus.WAITING_INPUT
    parks = {"provider": "openai", "limit": "requests_per_minute"}
    assert _delta(before, after, "agentdesk_provider_rate_limit_parks_total", **parks) == 1


def test_an_experiments_run_is_counted_apart_from_the_agents_runs(
    make_agent: Callable[..., Agent], fake_llm_server: FakeProviderServer
) -> None:
    from agents.models import Execution
    from agents.runtime import loop
    from tests.processes import pending_execution

    agent = make_agent("openai")
    fake_llm_server.set_responder(by_turn(text_reply("Hi.")), key=agent.llm_model)
    execution = pending_execution(agent, input_text="Rehearse.")
    with tenancy.agency_context(agent.agency_id):
        Execution.objects.filter(pk=execution.pk).update(purpose="evaluation")
    before = own_scrape()
    assert loop.run_execution(execution.id, agency_id=agent.agency_id) == "completed"
    after = own_scrape()
    # None of the agent's runs: started, finished and duration leave it out...
    assert _delta(before, after, "agentdesk_runs_started_total") == 0
    assert _delta(before, after, "agentdesk_runs_finished_total") == 0
    assert _delta(before, after, "agentdesk_run_duration_seconds_count") == 0
    # ...counted apart; its model call is real load all the same.
    finished = "agentdesk_evaluation_runs_finished_total"
    assert _delta(before, after, finished, status="completed") == 1
    assert _delta(before, after, "agentdesk_model_call_duration_seconds_count") == 1
