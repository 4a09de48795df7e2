"""The few Kubernetes API calls the Job executor makes, through the official client (the
``kubernetes`` extra), imported only when that executor is chosen. Every failure of the API is a
:class:`SandboxError` naming the call and the API's answer (a 403 names the RBAC it lacks).

Credentials: the worker's service account inside a cluster, or the kubeconfig file
``AGENTDESK_SANDBOX_K8S_KUBECONFIG`` names. The client reaches the API server only: it never
talks to the sandbox's pod, whose log it reads through the API.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tools.sandbox.base import SandboxError

RBAC = "deploy/kubernetes/components/sandbox-jobs/rbac.yaml"
CALL_SECONDS = 10  # one API call's own timeout: the API server answers or the run fails


@dataclass(frozen=True)
class JobState:
    done: bool  # the Job succeeded or failed
    failed: bool
    reason: str  # a failed Job's condition reason (DeadlineExceeded, BackoffLimitExceeded)


@dataclass(frozen=True)
class PodState:
    name: str
    exit_code: int | None  # the sandbox container's, once terminated
    reason: str  # terminated (OOMKilled, Error) or waiting (ImagePullBackOff, ...)


class JobApi:
    def __init__(self, *, kubeconfig: str = "") -> None:
        try:
            from kubernetes import client, config  # noqa: PLC0415 - the optional extra
            from kubernetes.config.config_exception import (  # noqa: PLC0415
                ConfigException,
            )
        except ImportError as missing:
            raise SandboxError(
                "AGENTDESK_SANDBOX_EXECUTOR=kubernetes needs the Kubernetes client: install "
                "agentdesk[kubernetes] (the image has it)"
            ) from missing
        configuration = client.Configuration()
        try:
            if kubeconfig:
                config.load_kube_config(
                    config_file=kubeconfig,
                    client_configuration=configuration,
                    persist_config=False,
                )
            else:
                config.load_incluster_config(client_configuration=configuration)
        except (ConfigException, OSError) as error:
            where = kubeconfig or "the in-cluster service account"
            raise SandboxError(f"no Kubernetes credentials from {where}: {error}") from error
        self._client = client.ApiClient(configuration)
        self._core = client.CoreV1Api(self._client)
        self._batch = client.BatchV1Api(self._client)

    def close(self) -> None:
        self._client.close()

    def _call(self, what: str, method: Any, *args: Any, **kwargs: Any) -> Any:
        from kubernetes.client.exceptions import ApiException  # noqa: PLC0415 - optional extra
        from urllib3.exceptions import HTTPError  # noqa: PLC0415 - the client's transport

        try:
            return method(*args, _request_timeout=CALL_SECONDS, **kwargs)
        except ApiException as error:
            message = _api_message(error)
            if error.status == 403:  # Forbidden
                message += f" (the worker's service account needs the Role in {RBAC})"
            raise SandboxError(f"the Kubernetes API refused to {what}: {message}") from error
        except HTTPError as error:
            raise SandboxError(f"the Kubernetes API did not answer ({what}): {error}") from error

    def create_job(self, namespace: str, body: dict[str, Any]) -> str:
        """Returns the Job's uid (the Secret's owner)."""
        job = self._call("create the Job", self._batch.create_namespaced_job, namespace, body)
        return str(job.metadata.uid)

    def create_secret(self, namespace: str, body: dict[str, Any]) -> None:
        self._call("create the Secret", self._core.create_namespaced_secret, namespace, body)

    def job_state(self, namespace: str, name: str) -> JobState:
        job = self._call("read the Job", self._batch.read_namespaced_job_status, name, namespace)
        status = job.status
        conditions = {c.type: c for c in (status.conditions or []) if c.status == "True"}
        failed = bool(status.failed) or "Failed" in conditions
        reason = (conditions["Failed"].reason or "") if "Failed" in conditions else ""
        return JobState(done=failed or bool(status.succeeded), failed=failed, reason=reason)

    def pod(self, namespace: str, job_name: str) -> PodState | None:
        pods = self._call(
            "list the Job's pods",
            self._core.list_namespaced_pod,
            namespace,
            label_selector=f"job-name={job_name}",
        ).items
        if not pods:
            return None
        pod = pods[-1]  # one (backoffLimit 0, restartPolicy Never)
        exit_code, reason = None, ""
        for status in pod.status.container_statuses or []:
            state = status.state
            if state.terminated is not None:
                exit_code, reason = state.terminated.exit_code, state.terminated.reason or ""
            elif state.waiting is not None:
                reason = state.waiting.reason or ""
        return PodState(name=pod.metadata.name, exit_code=exit_code, reason=reason)

    def log(self, namespace: str, pod: str, *, limit_bytes: int) -> str:
        # Not preloaded: the client would "deserialize" a log that looks like JSON.
        response = self._call(
            "read the pod's log",
            self._core.read_namespaced_pod_log,
            pod,
            namespace,
            container="sandbox",
            limit_bytes=limit_bytes,
            _preload_content=False,
        )
        return bytes(response.data).decode(errors="replace")

    def delete(self, namespace: str, name: str) -> list[str]:
        """Delete the Job (its pods with it) and the Secret; returns what could not be deleted
        (a missing one is deleted). The Job's TTL and the Secret's owner reference are the
        cluster's own backstop for those."""
        left: list[str] = []
        for kind, method, kwargs in (
            ("Job", self._batch.delete_namespaced_job, {"propagation_policy": "Background"}),
            ("Secret", self._core.delete_namespaced_secret, {}),
        ):
            try:
                self._call(f"delete the {kind}", method, name, namespace, **kwargs)
            except SandboxError as error:
                if getattr(error.__cause__, "status", None) != 404:  # Not Found
                    left.append(f"{kind}: {error}")
        return left


def _api_message(error: Any) -> str:
    """The API's Status message, else its HTTP status and reason."""
    try:
        return str(json.loads(error.body)["message"])
    except (TypeError, ValueError, KeyError):
        return f"{error.status} {error.reason}"
