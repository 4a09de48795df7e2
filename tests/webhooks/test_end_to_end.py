"""Deliveries end to end: a real Celery worker runs the started run against the fake provider
server, and the model is given the delivery's body; the same delivery sent twice at once starts
one run; the README's `curl` + `openssl` commands work against the real ASGI server, which also
refuses an oversized body without waiting for it."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test import Client

from agents.models import Agent, ExecutionStatus, TriggerOutcome
from core import tenancy
from crm.models import Note
from devkit.demo import demo_data_seed
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.demo import DemoModelServer
from devkit.fake_server.script import by_turn, text_reply
from live.selectors import failed_tool_calls
from tests.factories import AgencyFactory, SiteFactory
from tests.processes import AsgiServer, Worker, wait_for
from tests.webhooks.conftest import encode, make_hook, runs, signed_headers, trigger_logs
from tools.models import ToolCall
from webhooks import receive as receive_module

pytestmark = pytest.mark.slow
README = Path(__file__).resolve().parents[2] / "README.md"


def test_a_signed_delivery_runs_the_agent_with_the_body_in_its_first_message(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
) -> None:
    agent = make_agent(trigger_conditions={"order.status": "paid"})
    fake_llm_server.set_responder(by_turn(text_reply("Order 77 noted.")), key=agent.llm_model)
    hook = make_hook(agent)
    raw = encode({"order": {"id": 77, "status": "paid", "customer": "Ada Lovelace"}})
    response = Client().post(
        hook.path,
        data=raw,
        content_type="application/json",
        headers=signed_headers(hook.secret, raw, delivery_id="order-77"),
    )
    assert response.status_code == 202, response.json()
    [run] = runs(agent)
    assert response.json()["execution_id"] == str(run.id)
    done = wait_for(run)
    assert done.status == ExecutionStatus.COMPLETED, done.error
    assert done.output == "Order 77 noted."
    [request] = fake_llm_server.requests_for(agent.llm_model)
    first_user = next(m for m in request.body["messages"] if m["role"] == "user")
    assert "Ada Lovelace" in first_user["content"]
    assert '"delivery_id": "order-77"' in first_user["content"]
    [log] = trigger_logs(agent)
    assert (log.outcome, log.execution_id) == (TriggerOutcome.INVOKED, run.id)


def test_the_same_delivery_sent_twice_at_once_starts_one_run(
    make_agent: Callable[..., Agent],
    fake_llm_server: FakeProviderServer,
    celery_worker: Worker,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    agent = make_agent()
    fake_llm_server.set_responder(by_turn(text_reply("Done.")), key=agent.llm_model)
    hook = make_hook(agent)
    real_create = receive_module.execution_create

    def slow_create(**kwargs: Any) -> Any:
        # The first request holds its (uncommitted) delivery row while the second one arrives.
        time.sleep(0.5)
        return real_create(**kwargs)

    monkeypatch.setattr(receive_module, "execution_create", slow_create)
    raw = encode({"n": 1})
    headers = signed_headers(hook.secret, raw, delivery_id="twice")
    barrier = threading.Barrier(2)
    statuses: list[int] = []

    def send() -> None:
        try:
            barrier.wait()
            response = Client().post(
                hook.path, data=raw, content_type="application/json", headers=headers
            )
            statuses.append(response.status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=send) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(statuses) == [202, 409]
    [run] = runs(agent)
    assert sorted(log.skip_reason for log in trigger_logs(agent)) == ["", "replayed"]
    assert wait_for(run).status == ExecutionStatus.COMPLETED


def _readme_section() -> str:
    return README.read_text().split("## Webhooks", 1)[1].split("\n## ", 1)[0]


def _readme_example() -> str:
    blocks = re.findall(r"```sh\n(.*?)```", _readme_section(), flags=re.DOTALL)
    [example] = [block for block in blocks if "openssl dgst" in block]
    return example


@pytest.fixture(scope="module")
def demo_model() -> Iterator[DemoModelServer]:
    with DemoModelServer(think_seconds=0, stream_interval=0, record=True) as server:
        yield server


def test_the_readmes_curl_and_openssl_example_runs_the_demo_agent_cleanly(
    live_db: None,
    demo_model: DemoModelServer,
    celery_worker: Worker,
    asgi_server: AsgiServer,
) -> None:
    """The README's commands as they are, on a webhook of the demo agent it names (the demo
    data and the demo model, as `manage.py up` has them): the run completes, no tool failed."""
    agency = AgencyFactory.create()
    SiteFactory.create(agency=agency)
    demo_data_seed(agency=agency, model_url=demo_model.openai_base_url)
    [name] = re.findall(r"demo agency's \*\*(\w+)\*\*", _readme_section())
    with tenancy.agency_context(agency.id):
        agent = Agent.objects.get(agency=agency, name=name)
    hook = make_hook(agent)
    example = _readme_example()
    [body] = re.findall(r"^BODY='(.*)'$", example, flags=re.M)
    env = {
        **os.environ,
        "WEBHOOK_URL": asgi_server.url + hook.path,
        "WEBHOOK_SECRET": hook.secret,
    }
    result = subprocess.run(
        ["/bin/bash", "-euo", "pipefail", "-c", example],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["status"] == "pending", answer
    [run] = runs(agent)
    assert answer["execution_id"] == str(run.id)
    assert answer["delivery_id"].startswith("enquiry-")
    assert run.trigger_data["payload"] == json.loads(body)
    done = wait_for(run)
    assert done.status == ExecutionStatus.COMPLETED, done.error
    with tenancy.agency_context(agency.id):
        calls = list(
            ToolCall.objects.filter(execution=run)
            .order_by("created_at")
            .values_list("tool_name", "status", "output")
        )
        note = Note.objects.filter(agency=agency).order_by("-created_at").first()
    assert [(tool, status) for tool, status, _ in calls] == [
        ("crm_get_contact", "completed"),
        ("crm_add_note", "completed"),
        ("task_create", "completed"),
    ], calls
    with tenancy.agency_context(agency.id):
        assert failed_tool_calls(done) == 0  # what the run's page flags as "failed"
    assert note is not None
    assert json.loads(body)["message"] in note.content


def _raw_request(server: AsgiServer, head: str, body: bytes) -> str:
    """Send ``head`` and the start of a body the client never finishes; the answer, if one
    comes within 10 s (a server that waited for the rest of the body would give none)."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(head.encode() + body)
        received = b""
        try:
            while b"\r\n\r\n" not in received:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                received += chunk
        except TimeoutError:
            return ""
        return received.decode("latin-1")


def test_the_server_refuses_a_huge_body_without_waiting_for_it(
    live_db: None, asgi_server: AsgiServer
) -> None:
    hook = make_hook()
    raw = encode({"blob": "x"})
    signed = signed_headers(hook.secret, raw)
    lines = [f"{name}: {value}" for name, value in signed.items()]
    declared = "\r\n".join(
        [
            f"POST {hook.path} HTTP/1.1",
            "Host: 127.0.0.1",
            "Content-Type: application/json",
            f"Content-Length: {500 * 1024 * 1024}",
            *lines,
            "",
            "",
        ]
    )
    answer = _raw_request(asgi_server, declared, b'{"blob": "' + b"x" * 1000)
    assert answer.startswith("HTTP/1.1 413"), answer or "no answer: the server waited for the body"
    chunked = "\r\n".join(
        [
            f"POST {hook.path} HTTP/1.1",
            "Host: 127.0.0.1",
            "Content-Type: application/json",
            "Transfer-Encoding: chunked",
            *lines,
            "",
            "",
        ]
    )
    piece = b"x" * (300 * 1024)  # over the 256 KiB limit; the chunked body never ends
    answer = _raw_request(asgi_server, chunked, f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
    assert answer.startswith("HTTP/1.1 413"), answer or "no answer: the server waited for the body"
    assert [log.skip_reason for log in trigger_logs(hook.agent)] == ["too_large", "too_large"]
