"""Loopback ports for launched servers: choosing free ones and asking who answers there."""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import socket
import tempfile
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


# Claims live in two places. In this process, a dict: the kernel may hand the same
# ephemeral port to two quick bind(0) calls once the first socket is closed. Across
# processes (pytest-xdist workers, two test runs on one machine), an flock on a file named
# after the port: a server killed and restarted on its port must not find it taken by
# another process's server in between, and the kernel drops the lock if its holder dies.
_CLAIM_DIR = os.path.join(tempfile.gettempdir(), f"seawall-ports-{os.getuid()}")
_claims: dict[int, list[int]] = {}  # port -> every port claimed with it (its bus)
_claim_files: dict[int, tuple[str, int]] = {}  # claimed port -> its lock file (path, fd)
_claimed_lock = threading.Lock()


def pick_free_port(max_port: int | None = None, *, bus: bool = False) -> int:
    """A loopback port that is free now and not handed out to another launched server.

    The port stays claimed, for this process and for every other process using this
    launcher, until `release_port`. `max_port` bounds the choice; `bus` also requires
    port + 10000 (the cluster bus) to be free, and claims it too.
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
        if _claim(port, [port, port + 10000] if bus else [port]):
            return port
    raise ServerStartError(
        f"found no free port on {HOST} (max_port={max_port}): stop some servers or "
        "widen net.ipv4.ip_local_port_range"
    )


def release_port(port: int) -> None:
    with _claimed_lock:
        for each in _claims.pop(port, []):
            _unlock(_claim_files.pop(each, None))


def _claim(port: int, ports: list[int]) -> bool:
    with _claimed_lock:
        if any(each in _claim_files for each in ports):
            return False
        for each in ports:
            held = _lock_file(each)
            if held is None:
                for taken in ports[: ports.index(each)]:
                    _unlock(_claim_files.pop(taken, None))
                return False
            _claim_files[each] = held
        _claims[port] = ports
        return True


def _lock_file(port: int) -> tuple[str, int] | None:
    """An open file holding an exclusive flock named after `port`, or None if another
    process holds it. If no such file can be made the claim is in-process only: (path, -1)."""
    path = os.path.join(_CLAIM_DIR, str(port))
    try:
        os.makedirs(_CLAIM_DIR, mode=0o700, exist_ok=True)
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                return None
            # A holder unlinks its file before unlocking it (see _unlock): a lock taken on
            # such an unlinked file claims nothing, so open the path again.
            try:
                if os.fstat(fd).st_ino == os.stat(path).st_ino:
                    return path, fd
            except FileNotFoundError:
                pass
            os.close(fd)
    except OSError:
        return path, -1


def _unlock(held: tuple[str, int] | None) -> None:
    if held is None or held[1] < 0:
        return
    path, fd = held
    # Unlinked while still locked, so no file is left behind and nobody can lock this
    # inode after us believing it is the claim on the port.
    with contextlib.suppress(OSError):
        os.unlink(path)
    os.close(fd)


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
