"""A fake Kubernetes API server on 127.0.0.1 for the Job executor's tests: the API server is
outside the platform, so it is faked at the network boundary, and the real ``kubernetes`` client
talks to it over HTTP.

It records every request, keeps the Jobs and Secrets created, and plays a Job's life by
``mode``: ``run`` — a fake kubelet runs the real runner (tools/sandbox/runner.py) on the job the
Secret holds, as a pod would, and the Job succeeds or fails by its exit status; ``exit`` — the
pod ends with ``exit_code``/``reason`` and ``log``; ``hang`` — the pod never starts (waiting
with ``reason``); ``deadline`` — the Job fails with DeadlineExceeded; ``forbidden`` — creating a
Job is refused with a 403.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

RUNNER = Path(__file__).resolve().parents[3] / "tools" / "sandbox" / "runner.py"
TOKEN = "fake-token"  # the fake server's own


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    body: Any
    authorization: str


@dataclass
class FakeKubernetes:
    mode: str = "run"
    exit_code: int = 0
    reason: str = ""
    log: str = ""
    requests: list[Request] = field(default_factory=list)
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    secrets: dict[str, dict[str, Any]] = field(default_factory=dict)
    created: dict[str, dict[str, Any]] = field(default_factory=dict)  # everything ever created
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)  # by job name
    logs: dict[str, str] = field(default_factory=dict)  # by pod name
    lock: threading.Lock = field(default_factory=threading.Lock)
    url: str = ""

    def kubeconfig(self, folder: Path) -> str:
        path = folder / "kubeconfig.json"  # JSON is YAML
        path.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
                    "users": [{"name": "worker", "user": {"token": TOKEN}}],
                    "contexts": [
                        {"name": "fake", "context": {"cluster": "fake", "user": "worker"}}
                    ],
                    "current-context": "fake",
                }
            )
        )
        return str(path)

    def calls(self, method: str) -> list[Request]:
        return [r for r in self.requests if r.method == method]

    # -- the Job's life ----------------------------------------------------------------------

    def _job_created(self, job: dict[str, Any]) -> None:
        name = job["metadata"]["name"]
        job["metadata"]["uid"] = str(uuid.uuid4())
        job["status"] = {"active": 1}
        if self.mode == "deadline":
            job["status"] = {
                "failed": 1,
                "conditions": [{"type": "Failed", "status": "True", "reason": "DeadlineExceeded"}],
            }
        elif self.mode == "hang":
            self._pod(name, waiting=self.reason or "ContainerCreating")
        elif self.mode == "exit":
            self._pod(name, exit_code=self.exit_code, reason=self.reason, log=self.log)
            self._finish(job, self.exit_code)
        elif self.mode == "run":
            threading.Thread(target=self._kubelet, args=(name,), daemon=True).start()

    def _pod(
        self,
        job: str,
        *,
        exit_code: int | None = None,
        reason: str = "",
        waiting: str = "",
        log: str = "",
    ) -> None:
        state: dict[str, Any] = (
            {"waiting": {"reason": waiting}}
            if waiting
            else {"terminated": {"exitCode": exit_code, "reason": reason}}
        )
        pod_name = f"{job}-x7k2p"
        image = "registry.example/agentdesk:1.2"
        self.pods[job] = {
            "metadata": {"name": pod_name, "labels": {"job-name": job}},
            "spec": {"containers": [{"name": "sandbox", "image": image}]},
            "status": {
                "containerStatuses": [
                    {
                        "name": "sandbox",
                        "image": image,
                        "imageID": "",
                        "ready": False,
                        "restartCount": 0,
                        "state": state,
                    }
                ]
            },
        }
        self.logs[pod_name] = log

    def _finish(self, job: dict[str, Any], exit_code: int) -> None:
        if exit_code == 0:
            job["status"] = {"succeeded": 1}
        else:
            job["status"] = {
                "failed": 1,
                "conditions": [
                    {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}
                ],
            }

    def _kubelet(self, name: str) -> None:
        """Run the pod as a kubelet would: the Secret's job file, the real runner."""
        secret = None
        for _ in range(200):
            with self.lock:
                secret = self.secrets.get(name)
            if secret is not None:
                break
            threading.Event().wait(0.05)
        assert secret is not None, "the Secret was never created"
        with tempfile.TemporaryDirectory() as folder:
            job_file = Path(folder) / "job.json"
            job = json.loads(base64.b64decode(secret["data"]["job.json"]))
            # A pod starts as its runAsUser already; here the runner keeps the test's own user
            # (as root it would drop to nobody, who cannot read this interpreter's lazy imports).
            job["uid"], job["gid"] = os.getuid(), os.getgid()
            job_file.write_text(json.dumps(job))
            done = subprocess.run(  # the project's runner, as a pod runs it
                [sys.executable, "-I", str(RUNNER), str(job_file)],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                check=False,
                timeout=60,
                cwd=folder,
            )
        with self.lock:
            self._pod(name, exit_code=done.returncode, log=done.stdout.decode())
            if name in self.jobs:
                self._finish(self.jobs[name], done.returncode)

    # -- HTTP ----------------------------------------------------------------------------------

    def handle(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> Any:
        parts = path.strip("/").split("/")
        with self.lock:
            if parts[:3] == ["apis", "batch", "v1"] and parts[5:6] == ["jobs"]:
                return self._jobs(method, parts[6:], body)
            if parts[:2] == ["api", "v1"] and parts[4:5] == ["secrets"]:
                return self._secrets(method, parts[5:], body)
            if parts[:2] == ["api", "v1"] and parts[4:5] == ["pods"]:
                return self._pods(parts[5:], query)
        return 404, _status(404, "NotFound", f"no route {path}")

    def _jobs(self, method: str, rest: list[str], body: Any) -> Any:
        if method == "POST":
            if self.mode == "forbidden":
                message = 'jobs.batch is forbidden: User "system:serviceaccount:a:w" cannot create'
                return 403, _status(403, "Forbidden", message)
            self.jobs[body["metadata"]["name"]] = body
            self.created[f"Job/{body['metadata']['name']}"] = body
            self._job_created(body)
            return 201, body
        job = self.jobs.get(rest[0])
        if job is None:
            return 404, _status(404, "NotFound", f'jobs.batch "{rest[0]}" not found')
        if method == "DELETE":
            del self.jobs[rest[0]]
            self.pods.pop(rest[0], None)
            return 200, _status(200, "", "")
        return 200, job

    def _secrets(self, method: str, rest: list[str], body: Any) -> Any:
        if method == "POST":
            self.secrets[body["metadata"]["name"]] = body
            self.created[f"Secret/{body['metadata']['name']}"] = body
            return 201, body
        if rest[0] not in self.secrets:
            return 404, _status(404, "NotFound", f'secrets "{rest[0]}" not found')
        del self.secrets[rest[0]]
        return 200, _status(200, "", "")

    def _pods(self, rest: list[str], query: dict[str, list[str]]) -> Any:
        if not rest:
            selector = query.get("labelSelector", [""])[0]
            job = selector.removeprefix("job-name=")
            items = [self.pods[job]] if job in self.pods else []
            return 200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items}
        log = self.logs.get(rest[0], "")
        limit = int(query.get("limitBytes", ["0"])[0]) or None
        return 200, log.encode()[:limit]


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "code": code,
        "reason": reason,
        "message": message,
    }


@contextmanager
def fake_kubernetes(**settings: Any) -> Iterator[FakeKubernetes]:
    fake = FakeKubernetes(**settings)

    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            split = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            query = parse_qs(split.query)
            fake.requests.append(
                Request(
                    self.command,
                    split.path,
                    query,
                    body,
                    self.headers.get("Authorization", ""),
                )
            )
            status, answer = fake.handle(self.command, split.path, query, body)
            data = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
            self.send_response(status)
            kind = "text/plain" if isinstance(answer, bytes) else "application/json"
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_DELETE = do_PATCH = _serve  # http.server's names

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
