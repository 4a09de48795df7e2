"""``manage.py up``: the whole platform in one process tree, for development and demos.

Starts (or reuses) the embedded PostgreSQL and Redis, migrates, refreshes the runtime role's grants,
starts the demo model (a scripted provider on a loopback port, in a thread of this process) and
seeds the demo agency, then runs the ASGI web server, a Celery worker and Celery beat as children
with prefixed log lines. Ctrl-C or SIGTERM stops every child, the demo model, then the embedded
servers this run started (the signal handlers only note the signal: see StopSignals). A child that
exits on its own is reported and restarted (at most 3 times a minute).
"""

from __future__ import annotations

import ipaddress
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from typing import IO, Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

from config.env import service_urls
from devkit.demo import DemoSeed, demo_model_port, demo_seed
from devkit.embedded import data_dir as embedded_data_dir
from devkit.fake_server.demo import DEMO_MODEL, DemoModelServer
from devkit.readiness import wait_until_healthy
from ops.metrics import multiprocess as metrics_directory

STOP_TIMEOUT_S = 15
RESTARTS_PER_MINUTE = 3
LOOPBACK = "127.0.0.1"
ENDPOINTS_VARIABLE = "AGENTDESK_LLM_PRIVATE_ENDPOINTS"
BASE_URL_VARIABLE = "AGENTDESK_BASE_URL"
DEBUG_VARIABLE = "DJANGO_DEBUG"
ARENAS_VARIABLE = "MALLOC_ARENA_MAX"
SEED_LABELS = {
    "agencies": "agency",
    "logins": "login",
    "providers": "LLM provider",  # created, or pointed at the demo model's new port
    "agents": "agent",
    "contacts": "contact",
    "memories": "memory",
    "risk_rules": "risk rule",
    "datasets": "dataset",
    "prices": "model price",
}


class StopSignals:
    """Ctrl-C and SIGTERM, as the main loop sees them.

    Python runs a signal's handler in the main thread between any two of its bytecodes: inside a
    ``with lock:`` block there (printing a line, or waiting on a ``threading.Event``), and inside
    the handler itself when a second signal lands while the first one's runs (GNU make passes
    the terminal's Ctrl-C or a group's SIGTERM on to ``up``, a fraction of a millisecond later).
    A handler that took a lock could wait forever for the thread it interrupted, so the handler
    only notes the signal; the main loop wakes up on it (``signal.set_wakeup_fd``), says so and
    stops everything.
    """

    def __init__(self) -> None:
        self.received: int | None = None  # the first signal's number
        self._reader, self._writer = socket.socketpair()
        self._reader.setblocking(False)
        self._writer.setblocking(False)

    def install(self) -> None:
        signal.set_wakeup_fd(self._writer.fileno(), warn_on_full_buffer=False)
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, self._note)

    def _note(self, signum: int, frame: Any) -> None:
        # No lock, no output, no Event.set() (it locks too): see the class's docstring.
        if self.received is None:
            self.received = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.received).name if self.received is not None else ""

    def wait(self, timeout: float) -> bool:
        """Sleep ``timeout`` seconds, less if a signal arrives; whether one has arrived."""
        if self.received is None:
            select.select([self._reader], [], [], timeout)
            try:
                while self._reader.recv(512):  # the bytes written for each signal
                    pass
            except BlockingIOError:
                pass
        return self.received is not None


@dataclass
class Child:
    name: str
    argv: list[str]
    process: subprocess.Popen[bytes] | None = None
    restarts: list[float] = field(default_factory=list)


class Command(BaseCommand):
    help = (
        "Run the platform: embedded services (unless DATABASE_URL/REDIS_URL are set), migrations, "
        "demo data, then web (ASGI), Celery worker and Celery beat until Ctrl-C / SIGTERM."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, default=8000, help="web port (default 8000)")
        parser.add_argument("--host", default="127.0.0.1", help="web address (default 127.0.0.1)")
        parser.add_argument(
            "--no-demo",
            action="store_true",
            help="neither seed the demo agency nor start the demo model",
        )
        parser.add_argument(
            "--concurrency",
            type=int,
            default=int(os.environ.get("CELERY_WORKER_CONCURRENCY", "64")),
            help="worker threads (default: CELERY_WORKER_CONCURRENCY or 64)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        self._signals = StopSignals()
        self._output_lock = threading.Lock()
        self._signals.install()

        services = service_urls()
        if services.embedded:
            self._say(
                "up",
                f"embedded services in {embedded_data_dir()} "
                f"({'started' if services.started_embedded else 'reused'})",
            )
        self._say("up", "applying migrations")
        call_command("migrate", interactive=False, verbosity=0)
        demo_model: DemoModelServer | None = None
        demo_port: int | None = None
        children = self._children(options)
        try:
            if not options["no_demo"]:
                demo_model, demo_port = self._start_demo_model()
                url = f"http://{LOOPBACK}:{demo_port}/v1"
                self._report_seed(demo_seed(model_url=url))
            env = self._child_env(
                services, demo_port, base_url=web_url(options), host=options["host"]
            )
            if settings.DEBUG and not is_loopback(options["host"]):
                self._say(
                    "up",
                    f"{DEBUG_VARIABLE} ignored: {options['host']} is reachable from other machines "
                    "and Django's debug pages show settings and code; errors get AgentDesk's pages",
                )
            # The metrics of the platform starting now: the last run's samples go (ops.metrics).
            env["PROMETHEUS_MULTIPROC_DIR"] = str(metrics_directory.reset())
            for child in children:
                if self._signals.received is None:
                    self._start(child, env)
            # Said once /healthz answers 200, meanwhile children that die are restarted.
            threading.Thread(target=self._announce, args=(options,), daemon=True).start()
            self._supervise(children, env)
        finally:
            if self._signals.received is not None:
                self._say("up", f"received {self._signals.name}, stopping")
            self._stop_children(children)
            if demo_model is not None:
                demo_model.stop()
                self._say("up", "demo model stopped")
            if services.started_embedded:
                from devkit import embedded  # noqa: PLC0415

                embedded.stop()
                self._say("up", "embedded PostgreSQL and Redis stopped")
            self._say("up", "stopped")

    # --- children -------------------------------------------------------------------------------
    def _children(self, options: dict[str, Any]) -> list[Child]:
        python = sys.executable
        return [
            Child(
                "web",
                [
                    python,
                    "-m",
                    "uvicorn",
                    "config.asgi:application",
                    "--host",
                    options["host"],
                    "--port",
                    str(options["port"]),
                    "--lifespan",
                    "off",
                    # Live events are small JSON; compressing each for every socket doubled
                    # the server's CPU per message delivered (bench/README.md, live latency).
                    "--ws-per-message-deflate",
                    "false",
                ],
            ),
            Child(
                "worker",
                [
                    python,
                    "-m",
                    "celery",
                    "-A",
                    "config",
                    "worker",
                    "--loglevel",
                    "INFO",
                    "--pool",
                    "threads",
                    "--concurrency",
                    str(options["concurrency"]),
                ],
            ),
            Child("beat", [python, "-m", "celery", "-A", "config", "beat", "--loglevel", "INFO"]),
        ]

    def _child_env(
        self, services: Any, demo_port: int | None, *, base_url: str, host: str = LOOPBACK
    ) -> dict[str, str]:
        env = dict(os.environ)
        if not is_loopback(host):
            # Django's debug pages (settings, every URL pattern, a traceback's variables) go to
            # this machine only: the web server is reachable from others on this address.
            env[DEBUG_VARIABLE] = "false"
        # glibc's malloc gives a process's threads up to 8 arenas per core, each keeping what was
        # freed in it: the web server runs each request's sync code on a new thread, the worker
        # runs on 64, and both kept growing in soaks (the web's malloc heaps by 16 MB from
        # minute 5 to 20, the worker by 13 % in 20 minutes); with 2 arenas both stay flat
        # (bench/README.md "Soak"). A value in the environment wins.
        env.setdefault(ARENAS_VARIABLE, "2")
        # Links in e-mails (an approval to decide) point at the address served here, unless the
        # environment (or .env, read into it by the settings) names one.
        env.setdefault(BASE_URL_VARIABLE, base_url)
        # Children connect to exactly the servers this process resolved, embedded or not.
        env.update(
            DATABASE_URL=services.database,
            DATABASE_OWNER_URL=services.database_owner,
            REDIS_URL=services.redis,
            DJANGO_SETTINGS_MODULE=os.environ.get("DJANGO_SETTINGS_MODULE", "config.settings.dev"),
            PYTHONUNBUFFERED="1",
        )
        if demo_port is not None:
            # The demo agency's provider is on loopback, which agencies' endpoints may not be:
            # let exactly the demo model's address and port through, nothing else there.
            allowed = [e for e in env.get(ENDPOINTS_VARIABLE, "").split(",") if e.strip()]
            env[ENDPOINTS_VARIABLE] = ",".join([*allowed, f"{LOOPBACK}:{demo_port}"])
        return env

    # --- demo -----------------------------------------------------------------------------------
    def _start_demo_model(self) -> tuple[DemoModelServer | None, int]:
        """The demo model on the port the demo provider already points at when it is free (the
        row then stays as it is), else on any free loopback port. When another ``up`` on the
        same database already serves it there, that one is used (None is returned with its
        port): moving the row to a new port would cut the other one's runs off."""
        port = demo_model_port()
        server: DemoModelServer | None = None
        if port:
            try:
                server = DemoModelServer(host=LOOPBACK, port=port)
            except OSError:
                if _answers_as_demo_model(port):
                    self._say("up", f"using the {DEMO_MODEL} of another `up` on port {port}")
                    return None, port
        if server is None:
            server = DemoModelServer(host=LOOPBACK, port=0)
        server.start()
        self._say("up", f"{DEMO_MODEL} listening on {server.openai_base_url}")
        return server, server.port

    def _report_seed(self, seed: DemoSeed) -> None:
        written = ", ".join(
            f"{n} {_plural(SEED_LABELS.get(kind, kind)) if n > 1 else SEED_LABELS.get(kind, kind)}"
            for kind, n in seed.created.items()
            if n
        )
        self._say("up", f"demo agency seeded: {written}" if written else "demo agency up to date")

    def _start(self, child: Child, env: dict[str, str]) -> None:
        # A new session: Ctrl-C reaches only this process, which stops children in order.
        child.process = subprocess.Popen(
            child.argv,
            env=env,
            cwd=settings.BASE_DIR,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        assert child.process.stdout is not None
        threading.Thread(
            target=self._pump, args=(child.name, child.process.stdout), daemon=True
        ).start()
        self._say("up", f"started {child.name} (pid {child.process.pid})")

    def _pump(self, name: str, stream: IO[bytes]) -> None:
        for raw in iter(stream.readline, b""):
            self._say(name, raw.decode(errors="replace").rstrip())

    def _supervise(self, children: list[Child], env: dict[str, str]) -> None:
        while not self._signals.wait(0.5):
            for child in children:
                assert child.process is not None
                code = child.process.poll()
                if code is None:
                    continue
                self._say("up", f"{child.name} exited unexpectedly with code {code}")
                now = time.monotonic()
                child.restarts = [t for t in child.restarts if now - t < 60] + [now]
                if len(child.restarts) > RESTARTS_PER_MINUTE:
                    self._say("up", f"{child.name} keeps dying; stopping everything")
                    raise SystemExit(1)
                self._start(child, env)

    def _stop_children(self, children: list[Child]) -> None:
        running = [c for c in children if c.process is not None and c.process.poll() is None]
        for child in running:
            assert child.process is not None
            child.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for child in running:
            assert child.process is not None
            try:
                child.process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self._say("up", f"{child.name} did not stop in {STOP_TIMEOUT_S} s; killing it")
                child.process.kill()
                child.process.wait()
            self._say("up", f"{child.name} stopped")

    # --- terminal -----------------------------------------------------------------------------
    def _announce(self, options: dict[str, Any]) -> None:
        """The banner, once the platform is healthy (a thread of its own: the main one
        supervises the children meanwhile)."""

        def slow(status: int, body: dict[str, Any]) -> None:
            down = ", ".join(body.get("down") or []) or f"status {status or 'none'}"
            self._say("up", f"still starting: /healthz does not answer 200 yet ({down})")

        healthy = wait_until_healthy(
            f"{web_url(options)}/healthz",
            stopped=lambda: self._signals.received is not None,
            on_slow=slow,
        )
        if healthy and self._signals.received is None:
            self._banner(options)

    def _banner(self, options: dict[str, Any]) -> None:
        url = web_url(options)
        lines = [f"AgentDesk is running at {url}/admin/", f"health: {url}/healthz"]
        if not options["no_demo"]:
            password = settings.DEMO_ADMIN_PASSWORD
            lines += [
                f"demo login: {settings.DEMO_ADMIN_USERNAME} / {password} (agency admin)",
                f"approver login: {settings.DEMO_APPROVER_USERNAME} / {password} "
                "(decides approvals)",
                f"agents run on the {DEMO_MODEL}: open Agents, pick one, press Try it",
            ]
        lines.append("Ctrl-C stops everything")
        for line in lines:
            self._say("up", line)

    def _say(self, name: str, line: str) -> None:
        with self._output_lock:
            self.stdout.write(f"{name:>6} | {line}")
            self.stdout.flush()


def _plural(label: str) -> str:
    return f"{label[:-1]}ies" if label.endswith("y") else f"{label}s"


def web_url(options: dict[str, Any]) -> str:
    """Where people reach the web server ``up`` runs: its host and port (a wildcard address,
    which no browser can open, as ``localhost``)."""
    host = str(options["host"])
    if host in ("0.0.0.0", "::", ""):  # noqa: S104 - read, not bound: the wildcard's link
        host = "localhost"
    elif ":" in host:  # an IPv6 address
        host = f"[{host}]"
    return f"http://{host}:{options['port']}"


def is_loopback(host: str) -> bool:
    """Whether only this machine can reach a server bound to ``host`` (a name other than
    localhost counts as reachable: what it resolves to may change)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _answers_as_demo_model(port: int) -> bool:
    try:
        url = f"http://{LOOPBACK}:{port}/healthz"
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(json.load(response).get("status") == "ok")
    except (OSError, ValueError):
        return False
