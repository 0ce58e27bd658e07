"""What every launched server process has in common, Redis or not.

`ServerProcess` (redis/valkey) and `DaemonProcess` (etcd, ZooKeeper, PostgreSQL,
MariaDB) differ in how they start, wait and stop, but a process they hold is killed,
inspected and logged the same way: its own session and process group, watched by the
sidecar, a log file in its temporary directory. `Managed` is the `with` protocol for
anything with start() and stop(), the topologies (cluster, Sentinel) included.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from types import TracebackType
from typing import Self

from seawall.launcher import _watchdog
from seawall.launcher._ports import HOST, ServerStartError

__all__ = ["Managed", "SupervisedProcess", "wait_stopped"]


class Managed:
    """``with thing:`` starts it and stops it, whatever happens inside."""

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class SupervisedProcess(Managed):
    """A server process in its own process group, with its log in its directory."""

    # The file in `directory` that receives the server's log.
    LOG_NAME = "server.log"
    # Whether pause()/resume() signal the whole process group or the server alone.
    PAUSE_GROUP = True

    _proc: subprocess.Popen[bytes] | None
    _dir: str | None
    _paused: bool

    @property
    def host(self) -> str:
        return HOST

    @property
    def directory(self) -> str:
        raise NotImplementedError

    @property
    def log_path(self) -> str:
        return os.path.join(self.directory, self.LOG_NAME)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        """True while the process exists, paused or not."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def paused(self) -> bool:
        return self._paused and self.running

    def kill(self) -> None:
        """SIGKILL it, as a crash would; its directory stays for `restart()`."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            # The whole group: a fork child (AOF rewrite), a JVM's helpers or a
            # postmaster's backends must not outlive it.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        _watchdog.unwatch(proc.pid)
        self._paused = False

    def pause(self) -> None:
        """Freeze it with SIGSTOP: requests hang, clients time out, leases expire.
        Returns once it has stopped (see `wait_stopped`)."""
        self._send(signal.SIGSTOP)
        self._paused = True
        assert self._proc is not None
        wait_stopped(self._proc.pid)

    def resume(self) -> None:
        """Thaw it with SIGCONT."""
        self._send(signal.SIGCONT)
        self._paused = False

    def _send(self, sig: signal.Signals) -> None:
        if not self.running:
            raise ServerStartError(f"{self!r} is not running: start() or restart() it first")
        assert self._proc is not None
        if self.PAUSE_GROUP:
            os.killpg(self._proc.pid, sig)
        else:
            os.kill(self._proc.pid, sig)

    def log_tail(self, lines: int = 30) -> str:
        """The last `lines` lines of the server's log, for error messages."""
        if self._dir is None:
            return "(no log: the server is not started or already stopped)"
        try:
            with open(self.log_path, "rb") as log:
                log.seek(0, os.SEEK_END)
                log.seek(max(0, log.tell() - 16384))
                text = log.read().decode("utf-8", "replace")
        except OSError as exc:
            return f"(log unreadable: {exc})"
        return "\n".join(text.splitlines()[-lines:])


def wait_stopped(pid: int, timeout: float = 2.0) -> bool:
    """Whether every thread of process `pid` is stopped (SIGSTOP), waiting up to `timeout`.

    A stop signal takes effect asynchronously: a thread running on another CPU, or a CPU
    the host has descheduled, can go on for a moment after `kill()` returns, long enough
    to answer a request sent right after it. False if that lasted `timeout`, or where
    /proc cannot tell (the caller then has the signal's usual promptness only)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            states = [_state(pid, task) for task in os.listdir(f"/proc/{pid}/task")]
        except OSError:
            return False
        if all(state in ("T", "t") for state in states):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.001)


def _state(pid: int, task: str) -> str:
    """A thread's state letter from /proc (after the parenthesised command name)."""
    try:
        with open(f"/proc/{pid}/task/{task}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "T"  # the thread has exited: nothing of it runs
