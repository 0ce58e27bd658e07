"""A fixed set of real worker processes that the demo's scenarios drive.

The processes are started once (spawn, never fork: the parent has threads), warmed up, and
then given one task each per round, so a round measures the scenario and not interpreter
start-up. A task is a module-level function and its arguments; it runs in the worker and its
return value comes back over a pipe. Each worker has its own pipe, so a scenario can address
one process (pause it, hand it the next step) as well as all of them.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
import time
import traceback
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from typing import Any

import redis

from seawall.errors import SeawallError

Task = Callable[..., Any]

_STOP_GRACE = 2.0
_clients: dict[str, redis.Redis] = {}


class WorkerError(SeawallError):
    """A demo worker process failed a task or did not answer in time."""


def client(url: str) -> redis.Redis:
    """This worker's connection to `url` (one per process, reused across tasks)."""
    found = _clients.get(url)
    if found is None:
        found = _clients[url] = redis.Redis.from_url(url, socket_timeout=10.0)
    return found


def _serve(conn: Connection) -> None:
    # Ctrl-C reaches the whole process group; the parent decides how the demo stops.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Scenarios provoke lost leases on purpose and report them in their tables; the
    # library's warnings about them would only interleave with the output.
    logging.getLogger("seawall").addHandler(logging.NullHandler())
    logging.getLogger("seawall").propagate = False
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        task, args = message
        try:
            reply: tuple[str, Any] = ("ok", task(*args))
        except BaseException:
            reply = ("error", traceback.format_exc())
        conn.send(reply)


def warm_up(url: str) -> int:
    """Import what the tasks need and connect, so the first round is not the slow one."""
    import seawall  # noqa: F401

    client(url).ping()
    return os.getpid()


class WorkerPool:
    """`size` worker processes, each reachable by index."""

    def __init__(self, size: int) -> None:
        context = multiprocessing.get_context("spawn")
        self._conns: list[Connection] = []
        self._processes: list[multiprocessing.process.BaseProcess] = []
        self._busy: set[int] = set()  # workers with a task whose result was not read
        try:
            for index in range(size):
                parent_end, child_end = context.Pipe()
                process = context.Process(
                    target=_serve, args=(child_end,), name=f"seawall-demo-{index}", daemon=True
                )
                process.start()
                child_end.close()
                self._conns.append(parent_end)
                self._processes.append(process)
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __len__(self) -> int:
        return len(self._processes)

    def pid(self, index: int) -> int:
        pid = self._processes[index].pid
        assert pid is not None, "worker processes are started in __init__"
        return pid

    def submit(self, index: int, task: Task, *args: Any) -> None:
        """Start `task(*args)` in worker `index`; collect its result with `result`."""
        self._conns[index].send((task, args))
        self._busy.add(index)

    def result(self, index: int, timeout: float) -> Any:
        """The return value of worker `index`'s current task (its traceback if it raised)."""
        conn = self._conns[index]
        if not conn.poll(timeout):
            raise WorkerError(
                f"demo worker {index} (pid {self.pid(index)}) gave no answer within {timeout:.0f} s"
            )
        try:
            status, value = conn.recv()
            self._busy.discard(index)
        except (EOFError, OSError):
            self._processes[index].join(0.5)
            code = self._processes[index].exitcode
            raise WorkerError(f"demo worker {index} died (exit code {code})") from None
        if status != "ok":
            raise WorkerError(f"demo worker {index} failed:\n{value}")
        return value

    def run_all(self, task: Task, args: Sequence[tuple[Any, ...]], timeout: float) -> list[Any]:
        """Run `task(*args[i])` in worker i, all at once; their results in worker order."""
        if len(args) > len(self):
            raise ValueError(f"{len(args)} tasks for {len(self)} workers")
        for index, task_args in enumerate(args):
            self.submit(index, task, *task_args)
        deadline = time.monotonic() + timeout
        return [
            self.result(index, max(deadline - time.monotonic(), 0.0)) for index in range(len(args))
        ]

    def close(self) -> None:
        """Stop every worker: idle ones are asked to exit, busy ones are killed.

        A worker still in a task was abandoned (Ctrl-C, a failed round); waiting for it
        would only let it keep writing. Idempotent.
        """
        for conn in self._conns:
            with contextlib.suppress(OSError, ValueError):  # already closed or gone
                conn.send(None)
        for index, process in enumerate(self._processes):
            if process.pid is None or process.exitcode is not None:
                continue
            if index in self._busy:
                process.kill()
            # A scenario interrupted mid-pause must not leave a stopped process behind.
            _signal(process.pid, getattr(signal, "SIGCONT", None))
        deadline = time.monotonic() + _STOP_GRACE
        for process in self._processes:
            process.join(max(deadline - time.monotonic(), 0.0))
            if process.exitcode is None:
                process.kill()
                process.join(1.0)
        self._busy.clear()
        for conn in self._conns:
            conn.close()
        self._conns.clear()
        self._processes.clear()


def _signal(pid: int, signum: int | None) -> None:
    if signum is None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)
