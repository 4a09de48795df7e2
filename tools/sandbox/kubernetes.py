"""The Kubernetes Job executor, behind the same interface as bubblewrap, off by default
(``AGENTDESK_SANDBOX_EXECUTOR=kubernetes``; README "Python sandbox").

One script's run is one Job and one Secret, named alike:

- **The Secret** holds the job (code, limits, the result marker) and the datasets' files: a
  Secret, not a ConfigMap, because the files are the agency's data (RBAC and encryption at rest
  treat Secrets as such), and at most :data:`MAX_INPUT_BYTES` in all, a Secret's size limit
  (a larger input is refused before anything is created). It is owned by the Job, so the
  cluster deletes it with the Job even if this process cannot.
- **The Job** runs the project's image as ``python -I /app/tools/sandbox/runner.py
  /sandbox/job/job.json`` as nobody, with a read-only root filesystem, no service-account
  token, no service links, no privilege escalation, every capability dropped, the runtime's
  seccomp profile, a memory-backed scratch at /tmp, the Secret's files read-only under /data
  and /sandbox/job, CPU and memory limits, no retry, and ``activeDeadlineSeconds`` of the wall
  limit plus the pod's start-up allowance. Pods labelled :data:`SANDBOX_LABEL` get no traffic
  from :func:`network_policy` (deploy/kubernetes/components/sandbox-jobs applies it); the
  runner sets its rlimits inside the pod too.

The executor creates both, polls the Job until it is done or the deadline passes, reads the
pod's log (the script's output, capped by the runner, then the runner's JSON report after the
marker) and deletes the Job (with its pod) and the Secret on every path.
"""

from __future__ import annotations

import base64
import json
import logging
import math
import secrets
import time
from typing import Any

from tools.sandbox.base import (
    DATA_DIR,
    SCRATCH_DIR,
    SandboxError,
    SandboxLimits,
    SandboxRequest,
    SandboxResult,
)
from tools.sandbox.kubernetes_api import JobApi, PodState
from tools.sandbox.policy import PolicyViolation, enforce
from tools.sandbox.report import from_report

logger = logging.getLogger(__name__)
SANDBOX_LABEL = "agentdesk.io/sandbox"
NOBODY = 65534
JOB_DIR = "/sandbox/job"
MAX_INPUT_BYTES = 1024 * 1024  # a Secret's data may hold 1 MiB
DATA_KEY = "data.{}"  # a file's key in the Secret (a plain file name: FILE_NAME)
POLL_SECONDS = (0.1, 0.2, 0.5, 1.0)  # between reads of the Job's status, then every second
EXIT_SIGXCPU = 128 + 24


def network_policy(*, namespace: str) -> dict[str, Any]:
    """No traffic in or out of a sandbox's pod (apply once per namespace)."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "agentdesk-sandbox-isolated", "namespace": namespace},
        "spec": {
            "podSelector": {"matchLabels": {SANDBOX_LABEL: "true"}},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [],
            "egress": [],
        },
    }


class KubernetesJobExecutor:
    def __init__(
        self,
        *,
        limits: SandboxLimits | None = None,
        namespace: str = "agentdesk",
        image: str = "agentdesk:latest",
        kubeconfig: str = "",
        start_seconds: float = 30.0,
        grace_seconds: float = 5.0,
        policy: bool = True,
    ) -> None:
        self.limits = limits or SandboxLimits()
        self.namespace = namespace
        self.image = image
        self.kubeconfig = kubeconfig  # empty: the worker's in-cluster service account
        self.start_seconds = start_seconds  # for the pod to be scheduled and started
        # Waited past the Job's deadline, for the cluster's DeadlineExceeded (then killed anyway).
        self.grace_seconds = grace_seconds
        self.policy = policy

    @property
    def deadline_seconds(self) -> int:
        """The Job's activeDeadlineSeconds: the script's wall limit and the pod's start-up."""
        return math.ceil(self.limits.wall_seconds + self.start_seconds)

    def manifests(
        self, request: SandboxRequest, *, name: str = "", marker: str = ""
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The Secret and the Job that run ``request`` (its files are read here)."""
        name = name or f"agentdesk-sandbox-{secrets.token_hex(6)}"
        marker = marker or f"--agentdesk-result-{secrets.token_hex(16)}--"
        limits = self.limits
        job = {
            "code": request.code,
            "limits": limits.__dict__,
            "uid": NOBODY,
            "gid": NOBODY,
            "result_marker": marker,
        }
        data = {"job.json": json.dumps(job).encode()}
        for file_name, path in sorted(request.files.items()):
            try:
                data[DATA_KEY.format(file_name)] = path.read_bytes()
            except OSError as error:
                raise SandboxError(f"no such data file: {path} ({error})") from error
        size = sum(len(v) for v in data.values())
        if size > MAX_INPUT_BYTES:
            raise SandboxError(
                f"the script and its data are {size:,} bytes: the Kubernetes executor passes at "
                f"most {MAX_INPUT_BYTES:,} to its Job (a Secret's limit); name fewer or smaller "
                "datasets, or use the bubblewrap executor"
            )
        labels = {SANDBOX_LABEL: "true", "app.kubernetes.io/name": "agentdesk-sandbox"}
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": self.namespace, "labels": labels},
            "type": "Opaque",
            "immutable": True,
            "data": {key: _base64(value) for key, value in data.items()},
        }
        mounts: list[dict[str, Any]] = [
            {"name": "scratch", "mountPath": SCRATCH_DIR},
            {"name": "job", "mountPath": JOB_DIR, "readOnly": True},
        ]
        volumes: list[dict[str, Any]] = [
            {
                "name": "scratch",
                "emptyDir": {"medium": "Memory", "sizeLimit": f"{limits.scratch_mb}Mi"},
            },
            _secret_volume("job", name, [{"key": "job.json", "path": "job.json"}]),
        ]
        if request.files:  # (no items would project every key, the job's too)
            files = [{"key": DATA_KEY.format(n), "path": n} for n in sorted(request.files)]
            mounts.append({"name": "data", "mountPath": DATA_DIR, "readOnly": True})
            volumes.append(_secret_volume("data", name, files))
        container = {
            "name": "sandbox",
            "image": self.image,
            "command": ["python", "-I", "/app/tools/sandbox/runner.py", f"{JOB_DIR}/job.json"],
            "workingDir": SCRATCH_DIR,
            "env": [
                {"name": "HOME", "value": SCRATCH_DIR},
                {"name": "MPLBACKEND", "value": "Agg"},
                {"name": "MPLCONFIGDIR", "value": f"{SCRATCH_DIR}/.matplotlib"},
                {"name": "OPENBLAS_NUM_THREADS", "value": "1"},
                {"name": "OMP_NUM_THREADS", "value": "1"},
            ],
            "resources": {
                "limits": {
                    "cpu": "1",
                    "memory": f"{limits.memory_mb}Mi",
                    "ephemeral-storage": f"{limits.scratch_mb}Mi",
                },
                "requests": {"cpu": "100m", "memory": f"{min(limits.memory_mb, 256)}Mi"},
            },
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": NOBODY,
                "runAsGroup": NOBODY,
                "allowPrivilegeEscalation": False,
                "readOnlyRootFilesystem": True,
                "capabilities": {"drop": ["ALL"]},
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "volumeMounts": mounts,
        }
        job_manifest = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": self.namespace, "labels": labels},
            "spec": {
                "backoffLimit": 0,  # a script runs once: a retry would run it twice
                "activeDeadlineSeconds": self.deadline_seconds,
                "ttlSecondsAfterFinished": 300,  # the cluster's backstop to the delete below
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "restartPolicy": "Never",
                        "automountServiceAccountToken": False,
                        "enableServiceLinks": False,
                        "securityContext": {"runAsNonRoot": True, "runAsUser": NOBODY},
                        "containers": [container],
                        "volumes": volumes,
                    },
                },
            },
        }
        return secret, job_manifest

    def run(self, request: SandboxRequest) -> SandboxResult:
        if self.policy:
            try:
                enforce(request.code, max_bytes=self.limits.code_bytes)
            except PolicyViolation as refused:
                return SandboxResult(status="policy", error=str(refused))
        marker = f"--agentdesk-result-{secrets.token_hex(16)}--"
        secret, job = self.manifests(request, marker=marker)
        name = job["metadata"]["name"]
        api = JobApi(kubeconfig=self.kubeconfig)
        started = time.monotonic()
        try:
            uid = api.create_job(self.namespace, job)
            secret["metadata"]["ownerReferences"] = [
                {"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": uid}
            ]
            api.create_secret(self.namespace, secret)
            return self._wait(api, name, marker, started)
        finally:
            try:
                left = api.delete(self.namespace, name)
            finally:
                api.close()
            if left:
                # The Job's TTL and the Secret's owner take them; the run goes on meanwhile.
                logger.warning(
                    "sandbox %s left for the cluster to delete: %s", name, "; ".join(left)
                )

    def _wait(self, api: JobApi, name: str, marker: str, started: float) -> SandboxResult:
        deadline = started + self.deadline_seconds + self.grace_seconds
        polls = iter(POLL_SECONDS)
        while True:
            state = api.job_state(self.namespace, name)
            if state.done:
                break
            if time.monotonic() >= deadline:
                return self._timeout(api, name, started)
            time.sleep(min(next(polls, 1.0), max(deadline - time.monotonic(), 0.0)))
        wall = round(time.monotonic() - started, 3)
        if state.reason == "DeadlineExceeded":
            return self._timeout(api, name, started)
        pod = api.pod(self.namespace, name)
        if pod is None:
            error = f"the Job ended without a pod ({state.reason or 'no reason given'})"
            return SandboxResult(status="crashed", error=error, wall_seconds=wall)
        log = api.log(self.namespace, pod.name, limit_bytes=self._log_bytes(marker))
        return self._result(pod, log, marker, wall)

    def _timeout(self, api: JobApi, name: str, started: float) -> SandboxResult:
        pod = api.pod(self.namespace, name)
        never = f" (the pod never ran: {pod.reason})" if pod and pod.exit_code is None else ""
        error = (
            f"killed at the wall-clock deadline of {self.limits.wall_seconds:g} s "
            f"(the Job's activeDeadlineSeconds: {self.deadline_seconds}){never}"
        )
        wall = round(time.monotonic() - started, 3)
        return SandboxResult(status="timeout", error=error, wall_seconds=wall)

    def _log_bytes(self, marker: str) -> int:
        # The runner keeps the script's output under stdout_bytes characters (4 bytes at most
        # each in UTF-8), then writes the marker and its report.
        limits = self.limits
        return 4 * limits.stdout_bytes + len(marker) + limits.result_bytes + 64 * 1024

    def _result(self, pod: PodState, log: str, marker: str, wall: float) -> SandboxResult:
        output, found, report_text = log.rpartition(f"\n{marker}\n")
        if not found:
            output = log
        cap = self.limits.stdout_bytes
        common: dict[str, Any] = {"stdout": output[:cap], "wall_seconds": wall}
        if pod.reason == "OOMKilled":
            error = f"killed at the pod's memory limit of {self.limits.memory_mb} MB"
            return SandboxResult(status="memory_limit", error=error, **common)
        if pod.exit_code == EXIT_SIGXCPU:
            error = f"killed at its CPU limit of {self.limits.cpu_seconds} s"
            cpu = float(self.limits.cpu_seconds)
            return SandboxResult(status="cpu_limit", error=error, cpu_seconds=cpu, **common)
        try:
            report = json.loads(report_text) if found else None
        except ValueError:
            report = None
        if not isinstance(report, dict):
            error = (
                f"the sandbox ended without a result (exit status {pod.exit_code}"
                f"{', ' + pod.reason if pod.reason else ''})"
            )
            return SandboxResult(status="crashed", error=error, **common)
        common["stdout_truncated"] = int(report.get("stdout_seen", 0)) > len(common["stdout"])
        return from_report(report, limits=self.limits, **common)


def _secret_volume(name: str, secret: str, items: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "name": name,
        "secret": {"secretName": secret, "items": items, "defaultMode": 0o444},
    }


def _base64(value: bytes) -> str:
    return base64.b64encode(value).decode()
