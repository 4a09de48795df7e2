"""deploy/kubernetes/components/sandbox-jobs: an overlay with it renders and validates, only the
runs worker gets the service account (and its token), the Role allows every call the executor
makes against the (fake) API and nothing more, and the NetworkPolicy is the executor's own."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.tools.sandbox.fake_kubernetes import fake_kubernetes
from tools.sandbox.base import SandboxLimits, SandboxRequest
from tools.sandbox.kubernetes import KubernetesJobExecutor, network_policy

pytest.importorskip("kubernetes", reason="the kubernetes extra is not installed")
kubernetes_validate = pytest.importorskip("kubernetes_validate")

KUBERNETES = Path(__file__).resolve().parents[3] / "deploy" / "kubernetes"


def _render(tmp_path: Path) -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed (`make test` installs it: apt-get install kubectl)")
    tmp_path.mkdir()
    here = os.path.relpath(KUBERNETES, tmp_path)
    (tmp_path / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": [f"{here}/overlays/small"],
                "components": [f"{here}/components/sandbox-jobs"],
            }
        )
    )
    done = subprocess.run(
        [kubectl, "kustomize", "--load-restrictor=LoadRestrictionsNone", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def _allowed(role: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def _needed(method: str, path: str) -> tuple[str, str, str]:
    """The RBAC (group, resource, verb) an API request needs."""
    parts = path.strip("/").split("/")
    group = "" if parts[0] == "api" else parts[1]
    rest = parts[parts.index("namespaces") + 2 :]
    resource = "/".join([rest[0], *rest[2:]])  # jobs, jobs/status, pods, pods/log
    named = len(rest) > 1
    verb = {"POST": "create", "DELETE": "delete", "GET": "get" if named else "list"}[method]
    return group, resource, verb


def test_the_sandbox_component_gives_the_runs_worker_exactly_what_the_executor_calls(
    tmp_path: Path,
) -> None:
    docs = _render(tmp_path / "render")
    for doc in docs:
        if doc["apiVersion"].startswith(("keda.sh/", "monitoring.coreos.com/")):
            continue  # (validated against their CRDs by tests/deploy)
        kubernetes_validate.validate(doc, "1.32.0", strict=True)
    by_kind = {(d["kind"], d["metadata"]["name"]): d for d in docs}

    # Only the runs worker has the account and its token; the others keep none.
    for (kind, name), doc in by_kind.items():
        if kind != "Deployment":
            continue
        spec = doc["spec"]["template"]["spec"]
        if name == "agentdesk-worker-runs":
            assert spec["serviceAccountName"] == "agentdesk-sandbox-runner"
            assert spec["automountServiceAccountToken"] is True
            env = {e["name"]: e for e in spec["containers"][0]["env"]}
            assert env["AGENTDESK_SANDBOX_EXECUTOR"]["value"] == "kubernetes"
        else:
            assert "serviceAccountName" not in spec, name
            assert spec["automountServiceAccountToken"] is False, name
    binding = by_kind[("RoleBinding", "agentdesk-sandbox-runner")]
    assert binding["roleRef"]["kind"] == "Role"  # its namespace only, nothing cluster-wide
    assert binding["subjects"][0]["name"] == "agentdesk-sandbox-runner"
    allowed = _allowed(by_kind[("Role", "agentdesk-sandbox-runner")])

    policy = by_kind[("NetworkPolicy", "agentdesk-sandbox-isolated")]
    assert policy["spec"] == network_policy(namespace="agentdesk")["spec"]

    # Every request of a script's run (and of one that times out) is allowed, and nothing else.
    needed: set[tuple[str, str, str]] = set()
    for mode, wall in (("run", 30.0), ("hang", 0.5)):
        with fake_kubernetes(mode=mode) as fake:
            KubernetesJobExecutor(
                limits=SandboxLimits(wall_seconds=wall),
                start_seconds=0,
                grace_seconds=0,
                kubeconfig=fake.kubeconfig(tmp_path),
            ).run(SandboxRequest(code="result = [{'a': 1}]"))
        needed |= {_needed(r.method, r.path) for r in fake.requests}
    assert needed == allowed
