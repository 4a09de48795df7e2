"""The Kubernetes Job executor, behind the same interface as bubblewrap, off by default
(``AGENTDESK_SANDBOX_EXECUTOR=kubernetes``).

Built: the manifests of one script's run — a ConfigMap with the job (code, limits), a Job whose
pod runs the project's image as ``python -I /app/tools/sandbox/runner.py /sandbox/job/job.json``
as nobody, with a read-only root filesystem, no service-account token, no privilege escalation,
every capability dropped, the runtime's seccomp profile, a memory-backed scratch at /tmp, the
datasets' files read-only under /data (subPaths of one volume claim), CPU and memory limits and a
deadline; and the NetworkPolicy that gives pods labelled as sandboxes no ingress and no egress.
The runner still sets its rlimits inside the pod.

NOT built: submitting them and reading the pod's log back (the runner writes its result after
``result_marker`` on stdout in this mode). :meth:`KubernetesJobExecutor.run` says so.
"""

from __future__ import annotations

import json
import math
import secrets
from typing import Any

from tools.sandbox.base import (
    DATA_DIR,
    SCRATCH_DIR,
    SandboxError,
    SandboxLimits,
    SandboxRequest,
    SandboxResult,
)
from tools.sandbox.policy import PolicyViolation, enforce

SANDBOX_LABEL = "agentdesk.io/sandbox"
NOBODY = 65534
JOB_DIR = "/sandbox/job"


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
        data_claim: str = "",
        policy: bool = True,
    ) -> None:
        self.limits = limits or SandboxLimits()
        self.namespace = namespace
        self.image = image
        self.data_claim = data_claim  # the volume claim holding the datasets' files
        self.policy = policy

    def manifests(self, request: SandboxRequest, *, name: str = "") -> list[dict[str, Any]]:
        """The ConfigMap and the Job that would run ``request`` (``files`` are paths inside the
        data claim)."""
        name = name or f"agentdesk-sandbox-{secrets.token_hex(6)}"
        limits = self.limits
        job = {
            "code": request.code,
            "limits": limits.__dict__,
            "uid": NOBODY,
            "gid": NOBODY,
            "result_marker": f"--agentdesk-result-{secrets.token_hex(16)}--",
        }
        labels = {SANDBOX_LABEL: "true", "app.kubernetes.io/name": "agentdesk-sandbox"}
        config_map = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": self.namespace, "labels": labels},
            "data": {"job.json": json.dumps(job)},
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
            {"name": "job", "configMap": {"name": name}},
        ]
        if request.files:
            if not self.data_claim:
                raise SandboxError("AGENTDESK_SANDBOX_K8S_DATA_CLAIM is not set: no data volume")
            volumes.append(
                {
                    "name": "data",
                    "persistentVolumeClaim": {"claimName": self.data_claim, "readOnly": True},
                }
            )
            for file_name, path in sorted(request.files.items()):
                mounts.append(
                    {
                        "name": "data",
                        "mountPath": f"{DATA_DIR}/{file_name}",
                        "subPath": str(path).lstrip("/"),
                        "readOnly": True,
                    }
                )
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
                "activeDeadlineSeconds": math.ceil(limits.wall_seconds),
                "ttlSecondsAfterFinished": 300,
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
        return [config_map, job_manifest]

    def run(self, request: SandboxRequest) -> SandboxResult:
        if self.policy:
            try:
                enforce(request.code, max_bytes=self.limits.code_bytes)
            except PolicyViolation as refused:
                return SandboxResult(status="policy", error=str(refused))
        raise SandboxError(
            "the Kubernetes executor builds its Job (tools/sandbox/kubernetes.py) but does not "
            "submit it yet: use AGENTDESK_SANDBOX_EXECUTOR=bubblewrap"
        )
