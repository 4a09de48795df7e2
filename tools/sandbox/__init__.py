"""execute_python's sandbox: an interface (``base``), the AST policy in front (``policy``), the
bubblewrap executor (``bubblewrap``) and the Kubernetes Job executor (``kubernetes``). README
"Python sandbox". Nothing here imports pandas: only the sandboxed child does."""

from __future__ import annotations

from django.conf import settings

from tools.sandbox.base import (
    Executor,
    SandboxError,
    SandboxLimits,
    SandboxRequest,
    SandboxResult,
    Table,
)

__all__ = [
    "Executor",
    "SandboxError",
    "SandboxLimits",
    "SandboxRequest",
    "SandboxResult",
    "Table",
    "executor",
    "limits",
]


def limits() -> SandboxLimits:
    return SandboxLimits(
        wall_seconds=settings.AGENTDESK_SANDBOX_WALL_SECONDS,
        cpu_seconds=settings.AGENTDESK_SANDBOX_CPU_SECONDS,
        memory_mb=settings.AGENTDESK_SANDBOX_MEMORY_MB,
        processes=settings.AGENTDESK_SANDBOX_PROCESSES,
        stdout_bytes=settings.AGENTDESK_SANDBOX_STDOUT_KB * 1024,
        scratch_mb=settings.AGENTDESK_SANDBOX_SCRATCH_MB,
    )


def executor() -> Executor:
    """The executor the settings choose (AGENTDESK_SANDBOX_EXECUTOR), with their limits."""
    kind = settings.AGENTDESK_SANDBOX_EXECUTOR
    if kind == "bubblewrap":
        from tools.sandbox.bubblewrap import BubblewrapExecutor  # noqa: PLC0415 - chosen one only

        return BubblewrapExecutor(limits=limits())
    if kind == "kubernetes":
        from tools.sandbox.kubernetes import KubernetesJobExecutor  # noqa: PLC0415 - chosen one only

        return KubernetesJobExecutor(
            limits=limits(),
            namespace=settings.AGENTDESK_SANDBOX_K8S_NAMESPACE,
            image=settings.AGENTDESK_SANDBOX_K8S_IMAGE,
            kubeconfig=settings.AGENTDESK_SANDBOX_K8S_KUBECONFIG,
            start_seconds=settings.AGENTDESK_SANDBOX_K8S_START_SECONDS,
        )
    raise SandboxError(f"AGENTDESK_SANDBOX_EXECUTOR is {kind!r}: use bubblewrap or kubernetes")
