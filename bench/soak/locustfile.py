"""The soak's users (``python -m bench.soak`` runs Locust on this file, headless, in a process of
its own: Locust's gevent patches the interpreter it runs in).

What a browser or a client does, as the platform's pages and clients do it:

- :class:`Staff`: the demo admin browsing in turn two run pages, the home, the inbox, an agent
  page and the API docs, each page holding the sockets its scripts open (the agency's socket on
  every admin page, ``notifications.js``; the run's own on a run page, ``execution.js``) and
  making the requests they make when a live message arrives (the home's seven panels, the run
  page's refresh, the inbox's list and the sidebar's count);
- :class:`Approver`: the demo approver working the inbox (list, an approval's page, approve) and,
  now and then, denying one over the approvals API;
- :class:`ApiClient`: a client with an API key of its own starting runs and polling them;
- :class:`WebhookSender`: deliveries to the agents' inbound webhooks, signed as senders sign;
- :class:`Watcher`: websocket clients (an API key in the handshake) watching running runs to
  their end, then the next one.

The fixture (``SOAK_FIXTURE``, JSON written by :mod:`bench.soak.fixture`) names the logins,
agents, keys and webhooks; users per class come from ``SOAK_USERS`` (JSON, class name to count).
Counts Locust's statistics do not keep (answers by status, socket messages, handshake failures)
and when each request name was first answered go to ``SOAK_TALLY`` when Locust quits.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import time
import uuid
from collections import Counter
from typing import Any

import gevent
import gevent.event
import websocket  # websocket-client, which Locust installs; blocking calls yield under gevent
from locust import HttpUser, between, constant, events, task
from locust.env import Environment

from webhooks import signing  # the project's signer (standard library only)

FIXTURE: dict[str, Any] = json.loads(open(os.environ["SOAK_FIXTURE"]).read())  # noqa: SIM115
USERS: dict[str, int] = json.loads(os.environ.get("SOAK_USERS", "{}"))
BASE: str = FIXTURE["base"]
WS_BASE = BASE.replace("http://", "ws://", 1)
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
RUN_LINK = re.compile(rf"/admin/agents/execution/({UUID})/change/")
APPROVAL_LINK = re.compile(rf"/approvals/({UUID})/")
PANELS = ("summary", "in_progress", "waiting", "recent", "stuck", "charts", "success")
RUNS = [  # (agent slug, instruction) an API client starts; the SDR's wait for an approver
    ("sdr-agent", "Reach out to Priya Raman about her pricing question."),
    ("alex", "Log a call with Priya Raman and create a follow-up task."),
    ("bi-agent", "Write the weekly pipeline report."),
    ("cs-orchestrator", "Check which customers need a renewal check-in."),
]

tally: Counter[str] = Counter()  # "<kind> <name> <status>" -> count
first_seen: dict[str, float] = {}  # request name -> when it was first answered (Unix time)


def _count(key: str) -> None:
    tally[key] += 1


@events.request.add_listener
def _on_request(
    request_type: str, name: str, response: Any = None, exception: Any = None, **_: Any
) -> None:
    first_seen.setdefault(name, time.time())
    status = getattr(response, "status_code", None)
    if request_type != "WS" and status is not None:
        _count(f"http {name} {status}")


@events.quitting.add_listener
def _write_tally(environment: Environment, **_: Any) -> None:
    path = os.environ.get("SOAK_TALLY")
    if path:
        with open(path, "w") as out:
            json.dump({"counts": tally, "first_seen": first_seen}, out, indent=1, sort_keys=True)


class Socket:
    """A websocket a page or client holds open, read by a greenlet of its own; ``on_message``
    is called with each JSON message."""

    def __init__(self, user: HttpUser, path: str, label: str, **options: Any) -> None:
        self.label = label
        self.connection: websocket.WebSocket | None = None
        self.reader: gevent.Greenlet | None = None
        started = time.perf_counter()
        try:
            self.connection = websocket.create_connection(
                WS_BASE + path, origin=BASE, timeout=30, enable_multithread=True, **options
            )
        except Exception as exc:
            status = getattr(exc, "status_code", type(exc).__name__)
            _count(f"ws {label} handshake {status}")
            _fire(user, label, started, exc)
            return
        _count(f"ws {label} handshake 101")
        _fire(user, label, started, None)

    def start(self, on_message: Any) -> Socket:
        if self.connection is not None:
            self.reader = gevent.spawn(self._read, on_message)
        return self

    def _read(self, on_message: Any) -> None:
        assert self.connection is not None
        while True:
            try:
                raw = self.connection.recv()
            except websocket.WebSocketTimeoutException:
                continue
            except websocket.WebSocketConnectionClosedException:
                raw = ""
            if not raw:  # the server closed it while the page was open
                _count(f"ws {self.label} closed by server")
                return
            _count(f"ws {self.label} messages")
            try:
                message = json.loads(raw)
            except ValueError:
                continue
            on_message(message)

    def close(self) -> None:
        """Leave, as a browser leaving the page does: a close frame, the server's reply."""
        if self.connection is None:
            return
        if self.reader is not None:
            self.reader.kill(block=True, timeout=2)
        with contextlib.suppress(Exception):  # already gone
            self.connection.close(timeout=2)


def _fire(user: HttpUser, label: str, started: float, exc: BaseException | None) -> None:
    user.environment.events.request.fire(
        request_type="WS",
        name=f"{label} (handshake)",
        response_time=(time.perf_counter() - started) * 1000,
        response_length=0,
        exception=exc,
        context={},
    )


class Debounced:
    """What a page's script does at most once per ``delay`` after live messages (htmx's
    ``live-update``, the sidebar badge's reload), in a greenlet so the reader keeps reading."""

    def __init__(self, action: Any, delay: float = 0.4) -> None:
        self.action = action
        self.delay = delay
        self.pending: gevent.Greenlet | None = None

    def __call__(self) -> None:
        if self.pending is None or self.pending.dead:
            self.pending = gevent.spawn_later(self.delay, self.action)

    def cancel(self) -> None:
        if self.pending is not None:
            self.pending.kill(block=False)


def _login(user: HttpUser, login: dict[str, str]) -> None:
    user.client.get("/admin/login/", name="/admin/login/")
    token = user.client.cookies.get("csrftoken", "")
    form = {**login, "csrfmiddlewaretoken": token, "next": "/admin/"}
    response = user.client.post(
        "/admin/login/", data=form, name="/admin/login/ (POST)", allow_redirects=False
    )
    if response.status_code != 302:
        raise RuntimeError(f"login of {login['username']} failed: {response.status_code}")
    user.client.headers["X-CSRFToken"] = user.client.cookies.get("csrftoken", "")


class _Browser(HttpUser):
    """A logged-in person: each page holds the agency socket the admin's scripts open."""

    abstract = True
    login: dict[str, str]

    def on_start(self) -> None:
        _login(self, self.login)

    def _cookie(self) -> str:
        return "; ".join(f"{k}={v}" for k, v in self.client.cookies.items())

    def page(self, path: str, name: str, *, dwell: float, run_id: str | None = None) -> str:
        """Open ``path`` as a browser tab does, keep its sockets for ``dwell`` seconds, leave."""
        response = self.client.get(path, name=name)
        if response.status_code != 200:
            return ""
        html = response.text
        sockets: list[Socket] = []
        followers: list[Debounced] = []
        badge = Debounced(lambda: self.client.get("/live/waiting-count/", name="badge count"))
        followers.append(badge)
        on_status = self._follower(name, path, followers)

        def agency_message(message: dict[str, Any]) -> None:
            if message.get("type") == "status":
                badge()
                if on_status is not None:
                    on_status()

        sockets.append(
            Socket(self, "/ws/agency/", "/ws/agency/", cookie=self._cookie()).start(agency_message)
        )
        if run_id is not None:
            refresh = Debounced(lambda: self.client.get(path, name=f"{name} (refresh)"))
            followers.append(refresh)

            def run_message(message: dict[str, Any]) -> None:
                if message.get("type") == "status":
                    refresh()

            sockets.append(
                Socket(
                    self,
                    f"/ws/executions/{run_id}/?after=0",
                    "/ws/executions/[id]/ (page)",
                    cookie=self._cookie(),
                ).start(run_message)
            )
        gevent.sleep(dwell)
        for follower in followers:
            follower.cancel()
        for socket in sockets:
            socket.close()
        return html

    def _follower(self, name: str, path: str, followers: list[Debounced]) -> Any:
        """What a page reloads when a run changes state: the home its panels, the inbox its list."""
        if name == "home":

            def panels() -> None:
                group = [
                    gevent.spawn(self.client.get, f"/live/home/{p}/", name=f"home panel {p}")
                    for p in PANELS
                ]
                gevent.joinall(group, timeout=30)

            action: Any = panels
        elif name == "inbox":
            action = lambda: self.client.get(  # noqa: E731 - one call
                "/approvals/partials/list/", name="inbox list (partial)"
            )
        else:
            return None
        follower = Debounced(action)
        followers.append(follower)
        return follower


class Staff(_Browser):
    """The sequence of issue 25's item 1: two run pages, the home, the inbox, an agent page and
    the API docs, in turn, each held open a moment."""

    fixed_count = USERS.get("Staff", 0)
    wait_time = between(0.3, 1.0)
    login = FIXTURE["admin"]

    @task
    def tour(self) -> None:
        dwell = lambda: random.uniform(0.3, 2.0)  # noqa: E731
        listing = self.page("/admin/agents/execution/", "runs (list)", dwell=dwell())
        runs = list(dict.fromkeys(RUN_LINK.findall(listing)))[:20]
        for run_id in random.sample(runs, min(2, len(runs))):
            self.page(
                f"/admin/agents/execution/{run_id}/change/", "run page", dwell=dwell(),
                run_id=run_id,
            )  # fmt: skip
        self.page("/admin/", "home", dwell=dwell())
        self.page("/approvals/", "inbox", dwell=dwell())
        agent_id = random.choice(list(FIXTURE["agents"].values()))
        self.page(f"/admin/agents/agent/{agent_id}/change/", "agent page", dwell=dwell())
        self.client.get("/api/docs/", name="API docs")
        self.client.get("/api/schema/", name="API schema (the docs page loads it)")


class Approver(_Browser):
    """Works the inbox: the list, an approval's page, approve; now and then a denial over REST."""

    fixed_count = USERS.get("Approver", 0)
    wait_time = between(1.0, 3.0)
    login = FIXTURE["approver"]

    @task(4)
    def approve_in_inbox(self) -> None:
        listing = self.page("/approvals/", "inbox", dwell=random.uniform(0.3, 1.5))
        pending = list(dict.fromkeys(APPROVAL_LINK.findall(listing)))
        if not pending:
            return
        approval = random.choice(pending)
        self.page(f"/approvals/{approval}/", "approval page", dwell=random.uniform(0.3, 1.5))
        with self.client.post(
            f"/approvals/{approval}/approve/",
            data={"csrfmiddlewaretoken": self.client.cookies.get("csrftoken", "")},
            name="approval approve (POST)",
            allow_redirects=False,
            catch_response=True,
        ) as response:
            if response.status_code in (302, 409):  # 409: another approver decided it first
                response.success()
            else:
                response.failure(f"answered {response.status_code}")

    @task(1)
    def deny_over_api(self) -> None:
        response = self.client.get(
            "/api/v1/approvals/", params={"status": "pending"}, name="/api/v1/approvals/"
        )
        results = response.json().get("results", []) if response.status_code == 200 else []
        if results:
            self.client.post(
                f"/api/v1/approvals/{random.choice(results)['id']}/decide/",
                json={"decision": "deny", "reason": "Soak test: not this time."},
                name="/api/v1/approvals/[id]/decide/",
            )


_keys = iter(FIXTURE["api_keys"])


class ApiClient(HttpUser):
    """A client of its own key: starts a run, polls it until it ends or waits for a person."""

    fixed_count = USERS.get("ApiClient", 0)
    wait_time = between(1.0, 3.0)

    def on_start(self) -> None:
        self.client.headers["Authorization"] = f"Bearer {next(_keys)}"

    @task
    def start_and_poll(self) -> None:
        slug, text = random.choice(RUNS)
        response = self.client.post(
            f"/api/v1/agents/{FIXTURE['agents'][slug]}/execute/",
            json={"input": text},
            headers={"Idempotency-Key": str(uuid.uuid4())},
            name="/api/v1/agents/[id]/execute/",
        )
        if response.status_code != 202:
            return
        url = f"/api/v1/executions/{response.json()['execution_id']}/"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            gevent.sleep(1.0)
            polled = self.client.get(url, name="/api/v1/executions/[id]/")
            if polled.status_code == 200 and polled.json()["status"] not in {"pending", "running"}:
                _count(f"run ended {polled.json()['status']}")
                return
        _count("run still going after 120 s")


class WebhookSender(HttpUser):
    """Another system's deliveries, signed with the webhook's secret (README "Webhooks")."""

    fixed_count = USERS.get("WebhookSender", 0)
    wait_time = between(2.0, 4.0)  # under the 120 a minute each webhook takes

    @task
    def deliver(self) -> None:
        hook = random.choice(FIXTURE["webhooks"])
        body = json.dumps({"event": "order.created", "order": uuid.uuid4().hex[:8]}).encode()
        timestamp, delivery = str(int(time.time())), uuid.uuid4().hex
        self.client.post(
            hook["path"],
            data=body,
            headers={
                "Content-Type": "application/json",
                signing.DELIVERY_HEADER: delivery,
                signing.TIMESTAMP_HEADER: timestamp,
                signing.SIGNATURE_HEADER: signing.sign(
                    secret=hook["secret"], timestamp=timestamp, delivery_id=delivery, body=body
                ),
            },
            name="/api/v1/webhooks/[id]/",
        )


_running: dict[str, Any] = {"ids": [], "at": 0.0, "busy": False}


class Watcher(HttpUser):
    """A websocket client on a running run (API key in the handshake) until it ends or parks."""

    fixed_count = USERS.get("Watcher", 0)
    wait_time = constant(0.2)

    def on_start(self) -> None:
        self.key = FIXTURE["watch_key"]
        self.client.headers["Authorization"] = f"Bearer {self.key}"

    def _running_ids(self) -> list[str]:
        """The agency's running runs, listed by one watcher at a time, at most every 2 s."""
        if time.monotonic() - _running["at"] > 2.0 and not _running["busy"]:
            _running["busy"] = True
            try:
                response = self.client.get(
                    "/api/v1/executions/",
                    params={"status": "running", "page_size": 50},
                    name="/api/v1/executions/?status=running",
                )
                if response.status_code == 200:
                    _running["ids"] = [r["id"] for r in response.json()["results"]]
            finally:
                _running["at"] = time.monotonic()
                _running["busy"] = False
        return list(_running["ids"])

    @task
    def watch(self) -> None:
        ids = self._running_ids()
        if not ids:
            gevent.sleep(1.0)
            return
        ended = gevent.event.Event()

        def on_message(message: dict[str, Any]) -> None:  # snapshot, status and step carry it
            if message.get("status") not in {None, "pending", "running"}:
                ended.set()

        socket = Socket(
            self,
            f"/ws/executions/{random.choice(ids)}/?after=0",
            "/ws/executions/[id]/ (watcher)",
            header=[f"Authorization: Bearer {self.key}"],
        ).start(on_message)
        if socket.connection is not None:
            ended.wait(timeout=120)
            socket.close()
