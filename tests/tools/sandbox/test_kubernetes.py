"""The Kubernetes Job executor against a fake Kubernetes API server on 127.0.0.1 (the API server
is outside the platform: faked at the network boundary, the real client talks to it): the Job and
Secret it creates, the result read back from the pod's log, and the clean-up on every path."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.tools.sandbox.fake_kubernetes import TOKEN, FakeKubernetes, fake_kubernetes
from tools.sandbox.base import SandboxError, SandboxLimits, SandboxRequest
from tools.sandbox.kubernetes import MAX_INPUT_BYTES, KubernetesJobExecutor, network_policy

pytest.importorskip("kubernetes", reason="the kubernetes extra is not installed")

LIMITS = SandboxLimits(wall_seconds=30, memory_mb=512, scratch_mb=32, cpu_seconds=10)


def _executor(fake: FakeKubernetes, tmp_path: Path, **kwargs: Any) -> KubernetesJobExecutor:
    return KubernetesJobExecutor(
        limits=kwargs.pop("limits", LIMITS),
        namespace="analytics",
        image="registry.example/agentdesk:1.2",
        kubeconfig=fake.kubeconfig(tmp_path),
        **kwargs,
    )


def _cleaned_up(fake: FakeKubernetes) -> None:
    """The Job (its pods with it) and the Secret were deleted, and nothing is left."""
    deletes = {(r.path.split("/")[-2], r.path.split("/")[-1]) for r in fake.calls("DELETE")}
    names = {n.split("/")[1] for n in fake.created}
    assert len(names) == 1
    (name,) = names
    assert deletes == {("jobs", name), ("secrets", name)}
    (job_delete,) = [r for r in fake.calls("DELETE") if "/jobs/" in r.path]
    assert job_delete.query.get("propagationPolicy") == ["Background"]
    assert (fake.jobs, fake.secrets, fake.pods) == ({}, {}, {})


def test_a_script_runs_in_a_locked_down_job_and_its_result_is_read_back(
    tmp_path: Path, sales_csv: Path
) -> None:
    code = (
        "print('rows:', len(open_rows))\n"
        "result = [{'region': 'north', 'amount': 15}, {'region': 'south', 'amount': 27}]\n"
    )
    code = "open_rows = [1, 2, 3]\n" + code
    with fake_kubernetes(mode="run") as fake:
        result = _executor(fake, tmp_path).run(
            SandboxRequest(code=code, files={"sales.csv": sales_csv})
        )
    assert result.status == "ok", result.error
    assert result.stdout.strip() == "rows: 3"
    assert result.table is not None
    assert result.table.columns == ["region", "amount"]
    assert result.table.rows == [["north", 15], ["south", 27]]
    assert result.cpu_seconds > 0

    # Every call authenticated with the kubeconfig's credentials.
    assert {r.authorization for r in fake.requests} == {f"Bearer {TOKEN}"}
    job = fake.created[next(k for k in fake.created if k.startswith("Job/"))]
    secret = fake.created[next(k for k in fake.created if k.startswith("Secret/"))]
    assert job["metadata"]["namespace"] == "analytics"
    spec = job["spec"]
    assert (spec["backoffLimit"], spec["activeDeadlineSeconds"]) == (0, 60)  # 30 s + 30 s start
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert pod["automountServiceAccountToken"] is False
    assert pod["enableServiceLinks"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True
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
    assert not [e for e in container["env"] if "valueFrom" in e]  # no secret in the environment
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert mounts["/data"]["readOnly"] is True
    assert mounts["/sandbox/job"]["readOnly"] is True
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["scratch"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "32Mi"}
    assert volumes["data"]["secret"]["items"] == [{"key": "data.sales.csv", "path": "sales.csv"}]
    assert volumes["job"]["secret"]["items"] == [{"key": "job.json", "path": "job.json"}]
    # The Secret: the dataset's bytes and the job, owned by the Job (the cluster's backstop).
    name = job["metadata"]["name"]
    assert secret["immutable"] is True
    assert base64.b64decode(secret["data"]["data.sales.csv"]) == sales_csv.read_bytes()
    payload = json.loads(base64.b64decode(secret["data"]["job.json"]))
    assert payload["code"] == code
    assert payload["limits"]["cpu_seconds"] == 10
    (owner,) = secret["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"]) == ("Job", name)
    assert owner["uid"] == job["metadata"]["uid"]
    _cleaned_up(fake)


def test_a_script_that_raises_is_an_error_with_its_traceback_and_is_cleaned_up(
    tmp_path: Path,
) -> None:
    with fake_kubernetes(mode="run") as fake:
        result = _executor(fake, tmp_path).run(SandboxRequest(code="x = 1\ny = x / 0\n"))
    assert result.status == "error"
    assert "ZeroDivisionError" in result.error
    assert "line 2" in result.error
    _cleaned_up(fake)


def test_endless_output_is_cut_and_stopped_by_the_runner(tmp_path: Path) -> None:
    limits = SandboxLimits(wall_seconds=30, stdout_bytes=1000)
    with fake_kubernetes(mode="run") as fake:
        result = _executor(fake, tmp_path, limits=limits).run(
            SandboxRequest(code="while True:\n    print('spam' * 50)\n")
        )
    assert result.status == "output_limit"
    assert len(result.stdout) <= 1000
    _cleaned_up(fake)


def test_a_pod_that_dies_without_a_result_is_crashed_and_cleaned_up(tmp_path: Path) -> None:
    with fake_kubernetes(mode="exit", exit_code=139, reason="Error", log="Segmentation") as fake:
        result = _executor(fake, tmp_path).run(SandboxRequest(code="x = 1"))
    assert result.status == "crashed"
    assert "exit status 139" in result.error
    _cleaned_up(fake)


def test_an_oom_killed_pod_is_the_memory_limit(tmp_path: Path) -> None:
    with fake_kubernetes(mode="exit", exit_code=137, reason="OOMKilled") as fake:
        result = _executor(fake, tmp_path).run(SandboxRequest(code="x = 1"))
    assert result.status == "memory_limit"
    assert "512 MB" in result.error
    _cleaned_up(fake)


def test_a_job_past_its_deadline_is_a_timeout_and_is_deleted(tmp_path: Path) -> None:
    with fake_kubernetes(mode="deadline") as fake:
        result = _executor(fake, tmp_path).run(SandboxRequest(code="while True:\n    pass\n"))
    assert result.status == "timeout"
    assert "wall-clock deadline of 30 s" in result.error
    _cleaned_up(fake)


def test_a_pod_that_never_starts_is_killed_at_the_deadline(tmp_path: Path) -> None:
    limits = SandboxLimits(wall_seconds=0.5)
    with fake_kubernetes(mode="hang", reason="ImagePullBackOff") as fake:
        executor = _executor(fake, tmp_path, limits=limits, start_seconds=0, grace_seconds=0)
        executor_deadline = executor.deadline_seconds
        result = executor.run(SandboxRequest(code="x = 1"))
    assert executor_deadline == 1
    assert result.status == "timeout"
    assert "the pod never ran: ImagePullBackOff" in result.error
    _cleaned_up(fake)


def test_a_refusal_of_the_api_is_a_clear_error_naming_the_rbac(tmp_path: Path) -> None:
    refused = r"refused to create the Job: .*forbidden.*rbac"
    with fake_kubernetes(mode="forbidden") as fake, pytest.raises(SandboxError, match=refused):
        _executor(fake, tmp_path).run(SandboxRequest(code="x = 1"))
    assert fake.created == {}
    assert fake.calls("POST")
    assert not fake.calls("GET")


def test_data_past_a_secrets_limit_is_refused_before_anything_is_created(tmp_path: Path) -> None:
    big = tmp_path / "big.csv"
    big.write_bytes(b"a\n" + b"1\n" * (MAX_INPUT_BYTES // 2))
    request = SandboxRequest(code="x = 1", files={"big.csv": big})
    with fake_kubernetes(mode="run") as fake, pytest.raises(SandboxError, match="1,048,576"):
        _executor(fake, tmp_path).run(request)
    assert fake.requests == []


def test_the_policy_refuses_before_anything_is_created(tmp_path: Path) -> None:
    with fake_kubernetes(mode="run") as fake:
        result = _executor(fake, tmp_path).run(SandboxRequest(code="import os"))
    assert result.status == "policy"
    assert fake.requests == []


def test_without_the_client_the_executor_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "kubernetes", None)
    with pytest.raises(SandboxError, match=r"install agentdesk\[kubernetes\]"):
        KubernetesJobExecutor(kubeconfig="/nonexistent").run(SandboxRequest(code="x = 1"))


def test_a_job_without_data_mounts_no_data_volume() -> None:
    secret, job = KubernetesJobExecutor().manifests(SandboxRequest(code="x = 1"))
    pod = job["spec"]["template"]["spec"]
    assert {v["name"] for v in pod["volumes"]} == {"scratch", "job"}
    assert set(secret["data"]) == {"job.json"}


def test_the_network_policy_gives_sandbox_pods_no_traffic() -> None:
    policy = network_policy(namespace="analytics")
    assert policy["spec"] == {
        "podSelector": {"matchLabels": {"agentdesk.io/sandbox": "true"}},
        "policyTypes": ["Ingress", "Egress"],
        "ingress": [],
        "egress": [],
    }


def test_a_data_name_that_climbs_out_is_refused() -> None:
    with pytest.raises(ValueError, match="not a plain file name"):
        SandboxRequest(code="x = 1", files={"../etc/passwd": Path("x")})
