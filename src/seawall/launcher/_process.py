"""One redis/valkey server process on a free loopback port, in its own temporary directory."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from typing import Any, Self

import redis
import redis.asyncio

from seawall.launcher import _watchdog
from seawall.launcher._binary import ServerBinary, find_server_binary, server_version
from seawall.launcher._ports import (
    CLUSTER_MAX_PORT,
    HOST,
    UNKNOWN_PID,
    ServerStartError,
    pick_free_port,
    probe_pid,
    release_port,
)
from seawall.launcher._supervised import SupervisedProcess

__all__ = [
    "CLUSTER_MAX_PORT",
    "HOST",
    "ServerProcess",
    "ServerStartError",
    "pick_free_port",
    "start_all",
    "stop_all",
]

_PORT_ATTEMPTS = 5
_STOP_TIMEOUT = 5.0
_ADDRESS_IN_USE = ("Address already in use", "Could not create server TCP listening socket")


class _PortRace(Exception):
    """Another process took the port between choosing it and the server binding it."""


class ServerProcess(SupervisedProcess):
    """A redis-server/valkey-server bound to 127.0.0.1 only.

    The working directory (data, AOF, nodes.conf, log) lives until `stop()`, so `kill()`
    followed by `restart()` behaves like a crash and reboot: same port, same data.
    """

    # pause() freezes the server alone: a BGSAVE or AOF rewrite child may finish.
    PAUSE_GROUP = False

    def __init__(
        self,
        *,
        binary: ServerBinary | None = None,
        port: int | None = None,
        extra_args: Sequence[str] = (),
        appendonly: bool = False,
        cluster: bool = False,
        max_port: int | None = None,
        start_timeout: float = 10.0,
    ) -> None:
        self.binary = binary if binary is not None else find_server_binary()
        self.extra_args = list(extra_args)
        self.appendonly = appendonly
        self.cluster = cluster
        self.max_port = CLUSTER_MAX_PORT if cluster and max_port is None else max_port
        self.start_timeout = start_timeout
        self._fixed_port = port
        self._port: int | None = port
        self._dir: str | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._paused = False
        # Set once our own process answered: only then may SHUTDOWN go to the port,
        # which a stranger could hold while ours is still failing to bind.
        self._answered = False

    # -- properties ----------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._port is None:
            raise ServerStartError("the server has no port yet: call start() first")
        return self._port

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self.port}/0"

    @property
    def address(self) -> tuple[str, int]:
        return (HOST, self.port)

    @property
    def directory(self) -> str:
        if self._dir is None:
            raise ServerStartError("the server has no directory yet: call start() first")
        return self._dir

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> Self:
        """Launch the server and return once it answers PING (and has loaded its data)."""
        if self.running:
            return self
        if self._dir is not None:
            # Killed earlier: come back where the data is, as a rebooted machine would.
            return self.restart()
        self._launch()
        self._await_ready()
        return self

    def stop(self, timeout: float = _STOP_TIMEOUT) -> None:
        """Shut the server down (SIGKILL after `timeout`) and delete its directory."""
        self._signal_stop()
        self._finish_stop(timeout)

    def restart(self) -> Self:
        """Stop (if running) and start again on the same port and directory, reloading data."""
        if self._dir is None:
            return self.start()
        if self.running:
            self._signal_stop()
            self._reap(_STOP_TIMEOUT)
        # Not retried on another port: AOF data and cluster identity belong to this port.
        self._launch(new_port=False)
        self._await_ready(retry_port=False)
        return self

    # -- clients -------------------------------------------------------------------------

    def client(self, **kwargs: Any) -> redis.Redis:
        """A redis.Redis connected to this server; the caller closes it."""
        return redis.Redis(host=HOST, port=self.port, **kwargs)

    def async_client(self, **kwargs: Any) -> redis.asyncio.Redis:
        """A redis.asyncio.Redis connected to this server; the caller closes it."""
        return redis.asyncio.Redis(host=HOST, port=self.port, **kwargs)

    def __repr__(self) -> str:
        state = "paused" if self.paused else "running" if self.running else "stopped"
        return f"<ServerProcess {HOST}:{self._port} pid={self.pid} {state}>"

    # -- internals -----------------------------------------------------------------------

    def _argv(self) -> list[str]:
        """The full command line; subclasses (Sentinel) replace it."""
        argv = [self.binary.path, *self._common_args()]
        argv += ["--save", "", "--repl-diskless-sync-delay", "0", "--repl-ping-replica-period", "1"]
        if self._modern():
            # Fault tests freeze a server with DEBUG SLEEP, which 7.0+ refuses by default.
            argv += ["--enable-debug-command", "local"]
        if self.appendonly:
            argv += ["--appendonly", "yes", "--appendfsync", "always"]
        if self.cluster:
            argv += [
                "--cluster-enabled", "yes",
                "--cluster-config-file", "nodes.conf",
                "--cluster-node-timeout", "2000",
            ]  # fmt: skip
        return argv + self.extra_args

    def _common_args(self) -> list[str]:
        return [
            "--port", str(self.port),
            "--bind", HOST,
            "--daemonize", "no",
            "--dir", self.directory,
            "--logfile", self.log_path,
        ]  # fmt: skip

    def _launch(self, *, new_port: bool = True) -> None:
        if self._dir is None:
            self._dir = tempfile.mkdtemp(prefix="seawall-server-")
        if self._port is None or (new_port and self._fixed_port is None):
            if self._port is not None:
                release_port(self._port)
            self._port = pick_free_port(self.max_port, bus=self.cluster)
        with open(self.log_path, "ab") as log:
            # A new session keeps the terminal's Ctrl-C away from the server, so the
            # Python side decides the shutdown order, and lets kill() reach the group.
            self._proc = subprocess.Popen(
                self._argv(),
                cwd=self._dir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._paused = False
        self._answered = False
        _register(self)
        _watchdog.watch(self._proc.pid, self._dir)

    def _await_ready(self, *, retry_port: bool = True) -> None:
        for attempt in range(_PORT_ATTEMPTS):
            try:
                self._wait_for_ping()
                return
            except _PortRace:
                if not retry_port or self._fixed_port is not None:
                    raise ServerStartError(
                        f"port {self._port} on {HOST} is already in use: stop whatever "
                        "listens there or let seawall choose a port (port=None)"
                    ) from None
                if attempt + 1 == _PORT_ATTEMPTS:
                    break
                self._launch()
        raise ServerStartError(f"every port tried on {HOST} was taken by another process")

    def _wait_for_ping(self) -> None:
        proc = self._proc
        assert proc is not None
        deadline = time.monotonic() + self.start_timeout
        delay = 0.002
        while True:
            code = proc.poll()
            if code is not None:
                _watchdog.unwatch(proc.pid)
                tail = self.log_tail()
                if any(marker in tail for marker in _ADDRESS_IN_USE):
                    raise _PortRace
                raise ServerStartError(
                    f"{self.binary.path} exited with code {code} before answering PING on "
                    f"{HOST}:{self._port}; last lines of {self.log_path}:\n{tail}"
                )
            # The pid check rejects a stranger that grabbed the port while ours failed.
            answered = probe_pid(self.port, timeout=0.25)
            if answered == proc.pid or (answered == UNKNOWN_PID and proc.poll() is None):
                self._answered = True
                return
            if time.monotonic() > deadline:
                self.kill()
                raise ServerStartError(
                    f"{self.binary.path} did not answer PING on {HOST}:{self._port} within "
                    f"{self.start_timeout:g}s; last lines of {self.log_path}:\n"
                    f"{self.log_tail()}"
                )
            time.sleep(delay)
            delay = min(delay * 2, 0.05)

    def _signal_stop(self) -> None:
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        # A stopped process cannot act on anything until it is continued.
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGCONT)
        self._paused = False
        # SHUTDOWN acts at once, SIGTERM only at the next server tick (about 100 ms), and
        # SHUTDOWN is refused without the password: send both, first one wins.
        # NOW (7.0+) skips waiting for lagging replicas, which are being stopped too.
        if self._answered:
            command = b"SHUTDOWN NOSAVE NOW\r\n" if self._modern() else b"SHUTDOWN NOSAVE\r\n"
            with (
                contextlib.suppress(OSError),
                socket.create_connection((HOST, self.port), timeout=0.5) as sock,
            ):
                sock.sendall(command)
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()

    def _reap(self, timeout: float) -> None:
        proc = self._proc
        if proc is None:
            return
        try:
            proc.wait(min(1.0, timeout))
        except subprocess.TimeoutExpired:
            # A server busy loading data or blocked in a script ignores the first request.
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
            try:
                proc.wait(max(0.0, timeout - 1.0))
            except subprocess.TimeoutExpired:
                self.kill()
        _watchdog.unwatch(proc.pid)
        self._paused = False

    def _modern(self) -> bool:
        version = server_version(self.binary)
        return version >= (7, 0, 0) or version == (0, 0, 0)

    def _finish_stop(self, timeout: float) -> None:
        self._reap(timeout)
        self._proc = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
        if self._port is not None and self._fixed_port is None:
            release_port(self._port)
            self._port = None
        _unregister(self)


def start_all(processes: Iterable[ServerProcess]) -> None:
    """Start servers concurrently: launch every process, then wait for each to answer.

    On failure every process is stopped so nothing leaks.
    """
    procs = list(processes)
    try:
        for proc in procs:
            if not proc.running:
                proc._launch()
        for proc in procs:
            proc._await_ready()
    except BaseException:
        stop_all(procs)
        raise


def stop_all(processes: Iterable[ServerProcess], timeout: float = _STOP_TIMEOUT) -> None:
    """Stop servers concurrently: signal them all first, then wait for each."""
    procs = list(processes)
    for proc in procs:
        proc._signal_stop()
    for proc in procs:
        proc._finish_stop(timeout)


_live: set[ServerProcess] = set()
_live_lock = threading.Lock()


def _register(proc: ServerProcess) -> None:
    with _live_lock:
        _live.add(proc)


def _unregister(proc: ServerProcess) -> None:
    with _live_lock:
        _live.discard(proc)


@atexit.register
def _stop_leftovers() -> None:
    # Servers outliving the interpreter would hold ports and temp dirs forever; this is
    # the backstop for callers that never reached stop() (Ctrl-C, a failing fixture).
    with _live_lock:
        leftovers = list(_live)
    stop_all(leftovers, timeout=2.0)
    _watchdog.close_watchdog()
