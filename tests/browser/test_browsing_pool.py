"""Browsing the staff pages quickly does not run the web process out of database connections
(issue 25, item 1): an agency admin in headless Chromium goes through two run pages, the home,
the inbox, an agent's page and the API docs, in turn, 0.3 s apart, with both cores kept busy by
another process, against the real ASGI server and a real worker. Every page and fragment answers
without a 5xx, no socket handshake fails, the pool is never replaced, and once the browser is
closed the pool's connections are all idle again (read from the server's ``/metrics``)."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Error, Response
from prometheus_client.parser import text_string_to_metric_families

from agents.models import Agent, Execution
from agents.services import execution_create
from core import tenancy
from core.models import Role
from crm.models import Contact
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import by_turn, text_reply, tool_call_reply
from tests.browser.conftest import logged_in
from tests.factories import MembershipFactory
from tests.processes import AsgiServer, wait_for

pytestmark = pytest.mark.slow

NAVIGATIONS = 120
PAUSE_MS = 300
APPROVE_NOTES = {"type": "require_approval", "tools": ["crm_add_note"]}
# Two processes spinning on the 2-core machine, ended by the test (and by themselves at worst).
BURN = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"
SampleKey = tuple[str, frozenset[tuple[str, str]]]
Samples = dict[SampleKey, float]


def _scrape(server: AsgiServer) -> Samples:
    with urllib.request.urlopen(f"{server.url}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _replacements(samples: Samples) -> float:
    key: SampleKey = ("agentdesk_db_pool_replacements_total", frozenset())
    assert key in samples, "the pool replacement counter is not exported"
    return samples[key]


def _in_use(samples: Samples) -> float:
    key = ("agentdesk_db_pool_connections", frozenset({("state", "in_use")}))
    assert key in samples, "the web process's pool gauge is not exported"
    return samples[key]


@pytest.fixture
def web() -> Iterator[AsgiServer]:
    """A web process of this test's own: its pool and its counter start untouched."""
    server = AsgiServer().start()
    yield server
    server.stop()


@pytest.fixture
def busy_cores() -> Iterator[None]:
    burners = [subprocess.Popen([sys.executable, "-c", BURN.format(seconds=900)]) for _ in range(2)]
    yield
    for burner in burners:
        burner.kill()
        burner.wait(10)


def _parked_run(agent: Agent) -> Execution:
    with tenancy.agency_context(agent.agency_id):
        execution = execution_create(agent=agent, input="Note the renewal on Ada's contact.")
    assert execution is not None
    execution = wait_for(execution, {"waiting_approval", "completed", "failed"})
    assert execution.status == "waiting_approval", (execution.status, execution.error)
    return execution


@pytest.mark.usefixtures("celery_worker", "busy_cores")
def test_quick_browsing_under_load_keeps_the_pool_and_gives_every_connection_back(
    browser: Browser,
    web: AsgiServer,
    fake_llm_server: FakeProviderServer,
    make_agent: Callable[..., Agent],
) -> None:
    agent = make_agent(allowed_tools=["crm_*"], constraints=[APPROVE_NOTES], name="Notes")
    with tenancy.agency_context(agent.agency_id):
        contact = Contact.objects.create(
            agency_id=agent.agency_id, site_id=agent.site_id, first_name="Ada",
            email="ada@northwind.example",
        )  # fmt: skip
    note = tool_call_reply("crm_add_note", {"contact_id": str(contact.id), "content": "Renewed."})
    fake_llm_server.set_responder(by_turn(note, text_reply("Noted.")), key=agent.llm_model)
    runs = [_parked_run(agent), _parked_run(agent)]  # live pages: a socket and a resync each
    admin = MembershipFactory.create(agency_id=agent.agency_id, role=Role.ADMIN).user
    pages = [
        *(f"/admin/agents/execution/{run.id}/change/" for run in runs),
        "/admin/",
        "/approvals/",
        f"/admin/agents/agent/{agent.id}/change/",
        "/api/docs/",
    ]
    before = _replacements(_scrape(web))

    failures: list[str] = []

    def on_response(response: Response) -> None:
        if response.status >= 500:
            failures.append(f"{response.status} {response.url}")

    def on_console(message: ConsoleMessage) -> None:
        if "WebSocket" in message.text and "Unexpected response code" in message.text:
            failures.append(message.text)  # a handshake the server answered with an error

    context = logged_in(browser, web, admin)
    context.on("response", on_response)
    page = context.new_page()
    page.on("console", on_console)
    for number in range(NAVIGATIONS):
        try:
            page.goto(f"{web.url}{pages[number % len(pages)]}", wait_until="commit")
        except Error as exc:  # a navigation the next one interrupted: what the test is about
            if "interrupted" not in str(exc) and "ERR_ABORTED" not in str(exc):
                raise
        page.wait_for_timeout(PAUSE_MS)
    context.close()

    assert failures == [], failures[:10]
    # The browser is gone: every request and socket of it ends, and gives its connection back.
    deadline = time.monotonic() + 60
    samples = _scrape(web)
    while _in_use(samples) > 0 and time.monotonic() < deadline:
        time.sleep(0.5)
        samples = _scrape(web)
    assert _in_use(samples) == 0, f"connections never given back:\n{web.output()[-3000:]}"
    assert _replacements(samples) == before
    assert "pool gave no connection" not in web.output()
