"""Loopback ports for launched servers: choosing free ones and asking who answers there."""

from __future__ import annotations

import random
import socket
import threading

from seawall.errors import SeawallError

__all__ = [
    "CLUSTER_MAX_PORT",
    "HOST",
    "UNKNOWN_PID",
    "ServerStartError",
    "pick_free_port",
    "port_is_free",
    "probe_pid",
    "release_port",
]

HOST = "127.0.0.1"
# The cluster bus listens on port + 10000, which must itself be a valid port.
CLUSTER_MAX_PORT = 55535
_BOUNDED_MIN_PORT = 20000
# Never hand out the well-known ports: a system server (and its bus, and Sentinel) may
# own them, and a test that flushes "its" server must never flush that one.
_RESERVED_PORTS = frozenset({6379, 16379, 26379})


# probe_pid's answer for a server that is up but wants a password before saying who it is.
UNKNOWN_PID = -1


class ServerStartError(SeawallError):
    """A server could not be started: no free port, it exited, or it never answered PING."""


_claimed_ports: set[int] = set()
_claimed_lock = threading.Lock()


def pick_free_port(max_port: int | None = None, *, bus: bool = False) -> int:
    """A loopback port that is free now and not handed out to another launched server.

    The kernel may hand the same ephemeral port to two quick bind(0) calls once the first
    socket is closed, so ports stay claimed in-process until `release_port`. `max_port`
    bounds the choice; `bus` also requires port + 10000 (the cluster bus) to be free.
    """
    for _ in range(500):
        if max_port is None:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.bind((HOST, 0))
                port = int(sock.getsockname()[1])
        else:
            low = _BOUNDED_MIN_PORT if max_port > _BOUNDED_MIN_PORT else 1024
            port = random.randint(low, max_port)
            if not port_is_free(port):
                continue
        if port in _RESERVED_PORTS or (bus and not port_is_free(port + 10000)):
            continue
        with _claimed_lock:
            if port in _claimed_ports:
                continue
            _claimed_ports.add(port)
        return port
    raise ServerStartError(
        f"found no free port on {HOST} (max_port={max_port}): stop some servers or "
        "widen net.ipv4.ip_local_port_range"
    )


def release_port(port: int) -> None:
    with _claimed_lock:
        _claimed_ports.discard(port)


def port_is_free(port: int) -> bool:
    """True if nothing listens on (or holds) HOST:port right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True


def probe_pid(port: int, timeout: float) -> int | None:
    """The process_id of the server on `port` if it answers PING with PONG, else None.

    PING fails with -LOADING while data is being loaded, which is exactly the "not ready
    yet" case; INFO is pipelined behind it to learn who answered. A server started with
    a password answers -NOAUTH: it is up, but cannot say who it is (UNKNOWN_PID).
    """
    try:
        with (
            socket.create_connection((HOST, port), timeout=timeout) as sock,
            sock.makefile("rb") as reader,
        ):
            sock.sendall(b"PING\r\nINFO server\r\n")
            first = reader.readline()
            if first.startswith(b"-NOAUTH"):
                return UNKNOWN_PID
            if not first.startswith(b"+PONG"):
                return None
            header = reader.readline()
            if not header.startswith(b"$"):
                return None
            info = reader.read(int(header[1:]))
    except (OSError, ValueError):
        return None
    for line in info.split(b"\r\n"):
        if line.startswith(b"process_id:"):
            return int(line.split(b":", 1)[1])
    return None
