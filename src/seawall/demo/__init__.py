"""`seawall demo`: short, real scenarios on a real server, each printed as a table.

A scenario is a callable that takes the `DemoContext` (server URL, a client, the worker
processes, the quick flag) and returns a `Table`; `SCENARIOS` runs them in order and numbers
them. A new scenario (cache stampede, flash sale, ...) is one module here:

    def run(ctx: DemoContext) -> Table:
        table = Table("A cache stampede", [Column("cache"), Column("loads", ">")])
        results = ctx.workers.run_all(my_task, [(ctx.url, ctx.name("users:1"))] * 8, 60.0)
        table.add("seawall.Cache", str(sum(results)))
        return table

with `my_task` a module-level function (it runs in the spawned workers), and `run` appended
to `SCENARIOS`. Every key and lock name comes from `ctx.name(...)`, private to the run, so
the demo never touches data it did not create; those keys are deleted at the end.
"""

from __future__ import annotations

import contextlib
import secrets
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TextIO

import redis
from rich.text import Text

from seawall.demo import consistency, counter, fencing, flash_sale, stampede
from seawall.demo._context import DemoContext
from seawall.demo._table import Style, Table, render
from seawall.demo._workers import WorkerPool, warm_up
from seawall.launcher import describe_binary, find_embedded_first

__all__ = ["SCENARIOS", "WORKERS", "DemoContext", "Scenario", "Table", "run"]

# Eight processes share one server. Two cores are enough to interleave them; more cores
# only make the races in the unsafe rounds more frequent.
WORKERS = 8
_WARM_UP_TIMEOUT = 60.0


Scenario = Callable[[DemoContext], Table]

SCENARIOS: list[Scenario] = [
    counter.run,
    fencing.run,
    stampede.run,
    consistency.run,
    flash_sale.run,
]


def run(
    *, quick: bool = False, out: TextIO | None = None, scenarios: Sequence[Scenario] | None = None
) -> int:
    """Run the demo on a private server and print its tables to `out`; the exit status."""
    import seawall

    stream = sys.stdout if out is None else out
    console = Style.for_stream(stream).console(stream)
    progress = _Progress(sys.stderr)
    started = time.monotonic()

    def emit(line: str | Text = "") -> None:
        console.print(line)

    progress.show("starting a server and 8 worker processes")
    binary = find_embedded_first()
    with seawall.server(binary=binary) as url, WorkerPool(WORKERS) as workers:
        client = redis.Redis.from_url(url, socket_timeout=10.0)
        workers.run_all(warm_up, [(url,)] * len(workers), timeout=_WARM_UP_TIMEOUT)
        context = DemoContext(
            url=url,
            client=client,
            workers=workers,
            quick=quick,
            run_id=secrets.token_hex(4),
            progress=progress.show,
        )
        progress.clear()
        emit(
            Text.assemble(
                ("seawall demo", "bold"),
                f": {len(workers)} worker processes, {_server_name(client)} at {url}"
                + (" (--quick)" if quick else "")
                + f"\nserver binary: {describe_binary(binary)}",
            )
        )
        try:
            chosen = SCENARIOS if scenarios is None else scenarios
            for number, scenario in enumerate(chosen, start=1):
                table = scenario(context)
                progress.clear()
                emit()
                console.print(render(table, number=number))
        finally:
            progress.clear()
            with _interrupts_deferred():
                # Workers first: one still in a task (after Ctrl-C or a failure) would
                # write its keys again after they were deleted.
                workers.close()
                _delete_run_keys(client, context.run_id)
                client.close()
    emit()
    emit(f"demo finished in {time.monotonic() - started:.1f} s")
    return 0


def _server_name(client: redis.Redis) -> str:
    info = client.info("server")
    if "valkey_version" in info:
        return f"valkey {info['valkey_version']}"
    return f"redis {info.get('redis_version', '?')}"


def _delete_run_keys(client: redis.Redis, run_id: str) -> None:
    keys = list(client.scan_iter(match=f"*demo:{run_id}:*", count=1000))
    if keys:
        client.delete(*keys)


@contextlib.contextmanager
def _interrupts_deferred() -> Iterator[None]:
    """Let a short cleanup finish even if Ctrl-C arrives meanwhile; re-raise it after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if received:
        raise KeyboardInterrupt


class _Progress:
    """A transient status line on a terminal; silent when output goes to a pipe or file."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._enabled = stream.isatty()
        self._shown = False

    def show(self, message: str) -> None:
        if self._enabled:
            self._stream.write(f"\r\033[K  ... {message}")
            self._stream.flush()
            self._shown = True

    def clear(self) -> None:
        if self._shown:
            self._stream.write("\r\033[K")
            self._stream.flush()
            self._shown = False
