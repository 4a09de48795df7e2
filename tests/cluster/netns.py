"""Three machines on one: network namespaces joined by virtual ethernet. ``services`` holds a
bridge (the switch) at 10.231.0.1; each node has one veth to it (10.231.0.2, .3, ...) and its own
loopback. Nothing changes in the machine's own namespace.

A thread enters a namespace with :func:`inside` (``setns`` moves only the calling thread): the
sockets it opens there, and the processes it starts, live in that namespace for good."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

SUBNET = "10.231.0"
SERVICES_ADDRESS = f"{SUBNET}.1"


def unavailable_reason() -> str | None:
    """Why namespaces cannot be made here, or None."""
    if not hasattr(os, "setns"):
        return "os.setns is missing (Linux and Python >= 3.12 only)"
    if os.geteuid() != 0:
        return "network namespaces need root (ip netns add)"
    if shutil.which("ip") is None:
        return "the ip command (iproute2) is not installed"
    probe = f"adk-probe-{os.getpid()}"
    made = subprocess.run(
        ["ip", "netns", "add", probe], check=False, capture_output=True, text=True
    )
    if made.returncode != 0:
        return f"ip netns add failed: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], check=False, capture_output=True)
    return None


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


@dataclass
class Cluster:
    """``services`` and the ``nodes`` (their names in :attr:`namespaces`), made by :meth:`create`,
    removed by :meth:`remove` (their veths and bridge go with them)."""

    nodes: tuple[str, ...]
    tag: str = field(default_factory=lambda: str(os.getpid()))
    namespaces: dict[str, str] = field(default_factory=dict)

    def create(self) -> Cluster:
        names = ["services", *self.nodes]
        self.namespaces = {name: f"adk-{self.tag}-{name}" for name in names}
        for namespace in self.namespaces.values():
            # A leftover of a run killed before it could remove its own.
            subprocess.run(["ip", "netns", "del", namespace], check=False, capture_output=True)
            _ip("netns", "add", namespace)
            _ip("-n", namespace, "link", "set", "lo", "up")
        services = self.namespaces["services"]
        _ip("-n", services, "link", "add", "br0", "type", "bridge")
        _ip("-n", services, "addr", "add", f"{SERVICES_ADDRESS}/24", "dev", "br0")
        _ip("-n", services, "link", "set", "br0", "up")
        for number, node in enumerate(self.nodes, start=2):
            # Made in the node's namespace (the machine's own never holds a veth end), the peer
            # moved to the services' namespace and put on its bridge.
            namespace, peer = self.namespaces[node], f"veth-{node}"
            _ip("-n", namespace, "link", "add", "eth0", "type", "veth", "peer", "name", peer,
                "netns", services)  # fmt: skip
            _ip("-n", namespace, "addr", "add", f"{self.address(node)}/24", "dev", "eth0")
            _ip("-n", namespace, "link", "set", "eth0", "up")
            _ip("-n", services, "link", "set", peer, "master", "br0")
            _ip("-n", services, "link", "set", peer, "up")
            assert self.address(node) == f"{SUBNET}.{number}"
        return self

    def address(self, node: str) -> str:
        return f"{SUBNET}.{self.nodes.index(node) + 2}"

    def cut(self, node: str) -> None:
        """Take the node's link down: it reaches nothing but itself."""
        _ip("-n", self.namespaces[node], "link", "set", "eth0", "down")

    def remove(self) -> None:
        for namespace in self.namespaces.values():
            subprocess.run(["ip", "netns", "del", namespace], check=False, capture_output=True)

    @contextmanager
    def inside(self, name: str) -> Iterator[None]:
        """The calling thread in ``name``'s network namespace until the block ends."""
        with (
            open("/proc/thread-self/ns/net") as home,
            open(f"/run/netns/{self.namespaces[name]}") as there,
        ):
            os.setns(there.fileno(), os.CLONE_NEWNET)
            try:
                yield
            finally:
                os.setns(home.fileno(), os.CLONE_NEWNET)
