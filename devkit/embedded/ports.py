"""Ports and sockets at loopback: whether a server could listen on a port, whether something
accepts connections on it, a free one (for the embedded servers, and the tests' servers)."""

from __future__ import annotations

import random
import socket
from pathlib import Path


def _tcp_port_free(port: int) -> bool:
    """Whether a server could listen on ``port`` at loopback now (as Redis binds: SO_REUSEADDR,
    so the old server's connections in TIME_WAIT do not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _unix_socket_open(path: Path) -> bool:
    if not path.exists():
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(str(path)) == 0


def _new_port() -> int:
    """A free port below the kernel's ephemeral range when there is room, so that while the
    server is down no client connection takes it as its own local port; else any free one."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 0
    if low > 21000:
        for _ in range(50):
            port = random.randint(20000, low - 1)  # noqa: S311 - not for security
            if _tcp_port_free(port) and not port_open(port):
                return port
    return free_port()


def free_port() -> int:
    """A TCP port nobody listens on at loopback now (the embedded servers, tests' servers)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_open(port: int) -> bool:
    """Whether something accepts connections on ``port`` at loopback."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0
