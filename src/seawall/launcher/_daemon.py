"""A server process other than Redis (etcd, ZooKeeper, PostgreSQL, MariaDB) on free
loopback ports.

What `ServerProcess` does for redis-server, for any daemon that takes its ports and data
directory on the command line or in a file: a temporary directory kept until `stop()` (so
`kill()` then `restart()` is a crash and reboot on the same data), SIGSTOP/SIGCONT, the
watchdog that ends the process if the Python side dies, and the atexit backstop. The
subclass says how to build the command line and how to tell that the server answers, and
optionally what to run once before the first launch, which user to run as, how to ask
for a graceful stop and which log lines mean that its port was taken.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from typing import Any, Self

from seawall.errors import ServerNotFoundError
from seawall.launcher import _watchdog
from seawall.launcher._ports import HOST, ServerStartError, pick_free_port, release_port
from seawall.launcher._supervised import SupervisedProcess

# A RAM-backed directory, when the machine has one: a test server's fsyncs then cost
# nothing, as --unsafe-no-fsync would give on the etcd versions that have it.
_RAM_DIR = "/dev/shm"
_TOOL_TIMEOUT = 120.0


def is_executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def first_executable(names: Sequence[str], directories: Sequence[str]) -> str | None:
    """The first `name` found in any of `directories` (names in order of preference)."""
    for name in names:
        for directory in directories:
            if directory and is_executable(os.path.join(directory, name)):
                return os.path.join(directory, name)
    return None


def find_binary(candidates: list[str], package: str, what: str) -> str:
    """The first of `candidates` (names on PATH or absolute paths) that exists."""
    for candidate in candidates:
        found = shutil.which(candidate) if os.sep not in candidate else candidate
        if found and is_executable(found):
            return found
    raise ServerNotFoundError(
        f"no {what} found (looked for {', '.join(candidates)}): install it with "
        f"`apt-get install -y {package}` (Debian/Ubuntu)"
    )


class _PortRace(Exception):
    """Another process took a port between choosing it and the server binding it."""


class DaemonProcess(SupervisedProcess):
    """One server process bound to 127.0.0.1; subclasses give `_argv` and `_answers`."""

    # Short name, used for the temporary directory and in messages.
    KIND = "daemon"
    # How many loopback ports it needs (client, peer, ...).
    PORTS = 1
    # How long a graceful stop may take before SIGKILL.
    STOP_TIMEOUT = 5.0
    # What the server logs when a port it was given is taken (by a process that does not
    # claim ports through `_ports`). Non-empty: a first start that exits so retries on
    # fresh ports, so the ports must reach the server through `_argv`, not `_prepare`.
    ADDRESS_IN_USE: tuple[str, ...] = ()
    PORT_ATTEMPTS = 5

    def __init__(self, *, start_timeout: float = 30.0, in_memory: bool = True) -> None:
        self.start_timeout = start_timeout
        self.in_memory = in_memory
        self.ports: list[int] = []
        self._dir: str | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._paused = False
        self._user: pwd.struct_passwd | None = None
        self._log_offset = 0

    # -- subclass hooks ------------------------------------------------------------------

    def _argv(self) -> list[str]:
        """The command line, built again at every launch (settings may have changed)."""
        raise NotImplementedError

    def _prepare(self) -> None:
        """Once per directory, before the first launch: config files, initdb, ..."""

    def _answers(self) -> bool:
        """Whether the server serves clients now (one quick probe)."""
        raise NotImplementedError

    def _run_as(self) -> pwd.struct_passwd | None:
        """The user the server and its tools run as (None: ours); it owns `directory`."""
        return None

    def _ask_to_stop(self, proc: subprocess.Popen[bytes]) -> None:
        """Request a graceful shutdown; SIGKILL follows after STOP_TIMEOUT."""
        os.killpg(proc.pid, signal.SIGTERM)

    # -- properties ----------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The client port."""
        if not self.ports:
            raise ServerStartError(f"{self.KIND} has no port yet: call start() first")
        return self.ports[0]

    @property
    def directory(self) -> str:
        if self._dir is None:
            raise ServerStartError(f"{self.KIND} has no directory yet: call start() first")
        return self._dir

    @property
    def data_dir(self) -> str:
        return os.path.join(self.directory, "data")

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> Self:
        """Launch it and return once it serves clients."""
        if self.running:
            return self
        if self._dir is not None:
            # Killed or crashed earlier: come back on the same data, as a reboot would.
            return self.restart()
        self._create()
        for _attempt in range(self.PORT_ATTEMPTS):
            self._launch()
            try:
                self._await_ready()
                return self
            except _PortRace:
                for port in self.ports:
                    release_port(port)
                self.ports = [pick_free_port() for _ in range(self.PORTS)]
        self.stop()
        raise ServerStartError(f"every port tried on {HOST} was taken by another process")

    def stop(self, timeout: float | None = None) -> None:
        """Stop it gracefully (SIGKILL after `timeout`, default STOP_TIMEOUT) and delete
        its directory and ports."""
        self._terminate(self.STOP_TIMEOUT if timeout is None else timeout)
        self._proc = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
        for port in self.ports:
            release_port(port)
        self.ports = []
        with _live_lock:
            _live.discard(self)

    def restart(self) -> Self:
        """Stop (if running) and start again on the same ports and data directory."""
        if self._dir is None:
            return self.start()
        self._terminate(self.STOP_TIMEOUT)
        self._launch()
        try:
            self._await_ready()
        except _PortRace:
            # Not retried elsewhere: clients and the data know the server by this port.
            raise ServerStartError(
                f"port {self.port} on {HOST} was taken while {self.KIND} was down: stop "
                "whatever listens there, or stop() and start() it on a fresh port"
            ) from None
        return self

    def __repr__(self) -> str:
        state = "paused" if self.paused else "running" if self.running else "stopped"
        return f"<{type(self).__name__} {HOST}:{self.ports} pid={self.pid} {state}>"

    # -- internals -----------------------------------------------------------------------

    def _create(self) -> None:
        """The directory, the ports and the one-time preparation; nothing left on failure."""
        self._user = self._run_as()
        parent = _RAM_DIR if self.in_memory and os.path.isdir(_RAM_DIR) else None
        self._dir = tempfile.mkdtemp(prefix=f"seawall-{self.KIND}-", dir=parent)
        try:
            if self._user is not None:
                os.chown(self._dir, self._user.pw_uid, self._user.pw_gid)
            self.ports = [pick_free_port() for _ in range(self.PORTS)]
            self._prepare()
        except BaseException:
            self.stop()
            raise

    def _as_user(self) -> dict[str, Any]:
        """Popen arguments that run a child as `_run_as()`; no Python runs in the child
        (unlike preexec_fn), so this is safe with threads."""
        if self._user is None:
            return {}
        return {"user": self._user.pw_uid, "group": self._user.pw_gid, "extra_groups": []}

    def _run_tool(self, argv: list[str]) -> None:
        """Run a one-time tool (initdb, install-db) as the server's user, or raise with
        its output."""
        try:
            done = subprocess.run(
                argv,
                cwd=self.directory,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=_TOOL_TIMEOUT,
                check=False,
                **self._as_user(),
            )
        except subprocess.TimeoutExpired:
            raise ServerStartError(f"{argv[0]} did not finish within {_TOOL_TIMEOUT:g}s") from None
        if done.returncode != 0:
            output = (done.stdout + done.stderr).decode("utf-8", "replace").strip()
            raise ServerStartError(
                f"{argv[0]} exited with code {done.returncode}:\n{output[-2000:]}"
            )

    def _launch(self) -> None:
        with open(self.log_path, "ab") as log:
            self._log_offset = log.tell()
            # Its own session: Ctrl-C in the terminal does not reach it, kill() reaches
            # the whole group (a JVM's helpers, a postmaster's backends).
            self._proc = subprocess.Popen(
                self._argv(),
                cwd=self.directory,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                **self._as_user(),
            )
        self._paused = False
        _watchdog.watch(self._proc.pid, self.directory)
        with _live_lock:
            _live.add(self)

    def _await_ready(self) -> None:
        proc = self._proc
        assert proc is not None
        deadline = time.monotonic() + self.start_timeout
        delay = 0.005
        while True:
            code = proc.poll()
            if code is not None:
                _watchdog.unwatch(proc.pid)
                if self._port_was_taken():
                    raise _PortRace
                raise ServerStartError(
                    f"{self.KIND} exited with code {code} before serving on {HOST}:"
                    f"{self.port}; last lines of {self.log_path}:\n{self.log_tail()}"
                )
            if self._answers():
                return
            if time.monotonic() > deadline:
                self.kill()
                raise ServerStartError(
                    f"{self.KIND} did not serve on {HOST}:{self.port} within "
                    f"{self.start_timeout:g}s; last lines of {self.log_path}:\n{self.log_tail()}"
                )
            time.sleep(delay)
            delay = min(delay * 2, 0.05)

    def _port_was_taken(self) -> bool:
        if not self.ADDRESS_IN_USE:
            return False
        # Only what this launch wrote: an earlier launch's race is no news.
        try:
            with open(self.log_path, "rb") as log:
                log.seek(self._log_offset)
                text = log.read().decode("utf-8", "replace")
        except OSError:
            return False
        return any(marker in text for marker in self.ADDRESS_IN_USE)

    def _terminate(self, timeout: float) -> None:
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGCONT)  # a stopped process cannot exit
                self._ask_to_stop(proc)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        _watchdog.unwatch(proc.pid)
        self._paused = False


_live: set[DaemonProcess] = set()
_live_lock = threading.Lock()


@atexit.register
def _stop_leftovers() -> None:
    # Servers outliving the interpreter would hold ports and directories for ever; this
    # is the backstop for callers that never reached stop() (Ctrl-C, a failing fixture).
    with _live_lock:
        leftovers = list(_live)
    for proc in leftovers:
        with contextlib.suppress(Exception):
            proc.stop(timeout=2.0)
