"""A server process other than Redis (etcd, ZooKeeper) on free loopback ports.

What `ServerProcess` does for redis-server, for any daemon that takes its ports and data
directory on the command line or in a file: a temporary directory kept until `stop()` (so
`kill()` then `restart()` is a crash and reboot on the same data), SIGSTOP/SIGCONT, the
watchdog that ends the process if the Python side dies, and the atexit backstop. The
subclass says how to build the command line and how to tell that the server answers.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from types import TracebackType
from typing import Self

from seawall.errors import ServerNotFoundError
from seawall.launcher import _watchdog
from seawall.launcher._ports import HOST, ServerStartError, pick_free_port, release_port

_STOP_TIMEOUT = 5.0
# A RAM-backed directory, when the machine has one: a test server's fsyncs then cost
# nothing, as --unsafe-no-fsync would give on the etcd versions that have it.
_RAM_DIR = "/dev/shm"


def find_binary(candidates: list[str], package: str, what: str) -> str:
    """The first of `candidates` (names on PATH or absolute paths) that exists."""
    for candidate in candidates:
        found = shutil.which(candidate) if os.sep not in candidate else candidate
        if found and os.access(found, os.X_OK):
            return found
    raise ServerNotFoundError(
        f"no {what} found (looked for {', '.join(candidates)}): install it with "
        f"`apt-get install -y {package}` (Debian/Ubuntu)"
    )


class DaemonProcess:
    """One server process bound to 127.0.0.1; subclasses give `_argv` and `_answers`."""

    # Short name, used for the temporary directory and in messages.
    KIND = "daemon"
    # How many loopback ports it needs (client, peer, ...).
    PORTS = 1

    def __init__(self, *, start_timeout: float = 30.0, in_memory: bool = True) -> None:
        self.start_timeout = start_timeout
        self.in_memory = in_memory
        self.ports: list[int] = []
        self._dir: str | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._paused = False

    # -- subclass hooks ------------------------------------------------------------------

    def _argv(self) -> list[str]:
        raise NotImplementedError

    def _prepare(self) -> None:
        """Write config files into `directory` before the first launch."""

    def _answers(self) -> bool:
        """Whether the server serves clients now (one quick probe)."""
        raise NotImplementedError

    # -- properties ----------------------------------------------------------------------

    @property
    def host(self) -> str:
        return HOST

    @property
    def port(self) -> int:
        """The client port."""
        if not self.ports:
            raise ServerStartError(f"the {self.KIND} server has no port yet: call start()")
        return self.ports[0]

    @property
    def directory(self) -> str:
        if self._dir is None:
            raise ServerStartError(f"the {self.KIND} server has no directory: call start()")
        return self._dir

    @property
    def log_path(self) -> str:
        return os.path.join(self.directory, "server.log")

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def paused(self) -> bool:
        return self._paused and self.running

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> Self:
        """Launch it and return once it serves clients."""
        if self.running:
            return self
        if self._dir is None:
            parent = _RAM_DIR if self.in_memory and os.path.isdir(_RAM_DIR) else None
            self._dir = tempfile.mkdtemp(prefix=f"seawall-{self.KIND}-", dir=parent)
            self.ports = [pick_free_port() for _ in range(self.PORTS)]
            self._prepare()
        self._launch()
        self._await_ready()
        return self

    def stop(self, timeout: float = _STOP_TIMEOUT) -> None:
        """Terminate it (SIGKILL after `timeout`) and delete its directory and ports."""
        self._terminate(timeout)
        self._proc = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
        for port in self.ports:
            release_port(port)
        self.ports = []

    def kill(self) -> None:
        """SIGKILL it, as a crash would; its directory and ports stay for `restart()`."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        _watchdog.unwatch(proc.pid)
        self._paused = False

    def pause(self) -> None:
        """Freeze it with SIGSTOP: requests hang, clients time out."""
        self._send(signal.SIGSTOP)
        self._paused = True

    def resume(self) -> None:
        """Thaw it with SIGCONT."""
        self._send(signal.SIGCONT)
        self._paused = False

    def restart(self) -> Self:
        """Stop (if running) and start again on the same ports and data directory."""
        if self._dir is None:
            return self.start()
        self._terminate(_STOP_TIMEOUT)
        self._launch()
        self._await_ready()
        return self

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "paused" if self.paused else "running" if self.running else "stopped"
        return f"<{type(self).__name__} {HOST}:{self.ports} pid={self.pid} {state}>"

    # -- internals -----------------------------------------------------------------------

    def _launch(self) -> None:
        with open(self.log_path, "ab") as log:
            # Its own session: Ctrl-C in the terminal does not reach it, kill() reaches
            # the whole group (a JVM's helpers too).
            self._proc = subprocess.Popen(
                self._argv(),
                cwd=self.directory,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._paused = False
        _watchdog.watch(self._proc.pid, self.directory)
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

    def _send(self, sig: signal.Signals) -> None:
        if not self.running:
            raise ServerStartError(f"{self!r} is not running: start() or restart() it first")
        assert self._proc is not None
        os.killpg(self._proc.pid, sig)

    def _terminate(self, timeout: float) -> None:
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGCONT)  # a stopped process cannot exit
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        _watchdog.unwatch(proc.pid)
        self._paused = False
        _live.discard(self)

    def log_tail(self, lines: int = 30) -> str:
        try:
            with open(self.log_path, "rb") as log:
                log.seek(0, os.SEEK_END)
                log.seek(max(0, log.tell() - 16384))
                text = log.read().decode("utf-8", "replace")
        except (OSError, ServerStartError) as exc:
            return f"(log unreadable: {exc})"
        return "\n".join(text.splitlines()[-lines:])


_live: set[DaemonProcess] = set()


@atexit.register
def _stop_leftovers() -> None:
    # Servers outliving the interpreter would hold ports and directories for ever.
    for proc in list(_live):
        with contextlib.suppress(Exception):
            proc.stop(timeout=2.0)
