"""The Kubernetes Job executor: the Job it would create (submitting it is not built)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.sandbox.base import SandboxError, SandboxLimits, SandboxRequest
from tools.sandbox.kubernetes import KubernetesJobExecutor, network_policy


def test_the_job_runs_the_runner_locked_down_with_the_limits() -> None:
    executor = KubernetesJobExecutor(
        limits=SandboxLimits(wall_seconds=30, memory_mb=512, scratch_mb=32, cpu_seconds=10),
        namespace="analytics",
        image="registry.example/agentdesk:1.2",
        data_claim="agentdesk-datasets",
    )
    request = SandboxRequest(code="result = 1", files={"sales.csv": Path("agency-a/ds-1.csv")})
    config_map, job = executor.manifests(request, name="agentdesk-sandbox-t1")

    assert (job["kind"], job["metadata"]["namespace"]) == ("Job", "analytics")
    spec = job["spec"]
    assert (spec["backoffLimit"], spec["activeDeadlineSeconds"]) == (0, 30)
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert pod["automountServiceAccountToken"] is False
    assert pod["enableServiceLinks"] is False
    assert spec["template"]["metadata"]["labels"]["agentdesk.io/sandbox"] == "true"
    (container,) = pod["containers"]
    assert container["image"] == "registry.example/agentdesk:1.2"
    assert container["command"] == [
        "python",
        "-I",
        "/app/tools/sandbox/runner.py",
        "/sandbox/job/job.json",
    ]
    assert container["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 65534,
        "runAsGroup": 65534,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert container["resources"]["limits"] == {
        "cpu": "1",
        "memory": "512Mi",
        "ephemeral-storage": "32Mi",
    }
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert mounts["/data/sales.csv"] == {
        "name": "data",
        "mountPath": "/data/sales.csv",
        "subPath": "agency-a/ds-1.csv",
        "readOnly": True,
    }
    assert mounts["/sandbox/job"]["readOnly"] is True
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["scratch"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "32Mi"}
    assert volumes["data"]["persistentVolumeClaim"] == {
        "claimName": "agentdesk-datasets",
        "readOnly": True,
    }
    assert volumes["job"]["configMap"]["name"] == config_map["metadata"]["name"]
    payload = json.loads(config_map["data"]["job.json"])
    assert payload["code"] == "result = 1"
    assert payload["limits"]["cpu_seconds"] == 10
    assert payload["result_marker"].startswith("--agentdesk-result-")


def test_the_network_policy_gives_sandbox_pods_no_traffic() -> None:
    policy = network_policy(namespace="analytics")
    assert policy["spec"] == {
        "podSelector": {"matchLabels": {"agentdesk.io/sandbox": "true"}},
        "policyTypes": ["Ingress", "Egress"],
        "ingress": [],
        "egress": [],
    }


def test_files_without_a_data_claim_are_refused() -> None:
    request = SandboxRequest(code="x = 1", files={"a.csv": Path("a.csv")})
    with pytest.raises(SandboxError, match="AGENTDESK_SANDBOX_K8S_DATA_CLAIM"):
        KubernetesJobExecutor().manifests(request)


def test_running_applies_the_policy_then_says_submitting_is_not_built() -> None:
    executor = KubernetesJobExecutor()
    assert executor.run(SandboxRequest(code="import os")).status == "policy"
    with pytest.raises(SandboxError, match="does not submit it yet"):
        executor.run(SandboxRequest(code="x = 1"))


def test_a_data_name_that_climbs_out_is_refused() -> None:
    with pytest.raises(ValueError, match="not a plain file name"):
        SandboxRequest(code="x = 1", files={"../etc/passwd": Path("x")})
