"""Every Python example of README.md and docs/*.md, run as the reader sees it.

Blocks: each ```python fence. A document's blocks run in order in one namespace (a later
block uses the names of an earlier one, as a reader does), in a temporary working
directory (files an example writes, such as orders.db, land there), with top-level
`await` allowed: such a block runs on the document's one event loop, as it would in
`python -m asyncio`.

Not run: a block right after the line `<!-- not run: REASON -->` (an HTML comment, so
readers do not see it). REASON names the test that runs the same code, or says what the
block would need. Use it only where neither running the block as written nor fixing it
is right: an example that does not run is a bug of the document.

Servers: examples connect where a reader's server is: `redis.Redis()` or
`redis://localhost:6379/0` (LOCAL), Redlock masters at hosts r1..r5 (MASTERS), a Sentinel
at 10.0.0.5:26379 (SENTINEL). For the time of a document, redis-py's connections (sync and
asyncio) to those addresses go to private servers started for the document instead: only
the host and port given to redis-py's `Connection` change, nothing in the examples'
source. `seawall.server()` starts its own private server, as always. The few other things
an example reaches outside the process are redirected the same way and named in
`_outside`: the port a metrics endpoint listens on becomes a free one.

Beyond running: a call an example forgot to await fails it (it did nothing), and so does a
name the document uses but never defines (ruff's F821 over its blocks), since a function an
example defines runs only if called. A block still running after BLOCK_SECONDS fails.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import gc
import re
import signal
import subprocess
import sys
import textwrap
import threading
import types
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio.connection
import redis.connection

from seawall.launcher import SentinelGroup

ROOT = Path(__file__).resolve().parent.parent

LOCAL = [("localhost", 6379), ("127.0.0.1", 6379)]
# The independent masters of a Redlock example: redis.Redis(host="r1") ... "r5"
MASTERS = [(f"r{i}", 6379) for i in range(1, 6)]
SENTINEL = ("10.0.0.5", 26379)
SENTINEL_SERVICE = "mymaster"

# What a document needs besides a server at LOCAL.
NEEDS = {
    "README.md": {"masters"},
    "docs/redlock.md": {"masters"},
    "docs/replication.md": {"sentinel"},
    "docs/metrics.md": {"metrics"},
    "docs/cp-locks.md": {"etcd"},
}

# Examples take well under a second; a server start is not part of a block's time.
BLOCK_SECONDS = 20.0

NOT_RUN = re.compile(r"<!-- not run: (?P<reason>.+?) -->")
# A fence may be indented (inside a list item); its lines lose that indentation.
FENCE = re.compile(
    r"^(?P<indent>[ \t]*)```python[ \t]*\n(?P<source>.*?)^(?P=indent)```[ \t]*$", re.M | re.S
)
# Any other fence whose info string starts with "py" would hide an example from the runner.
LOOKALIKE = re.compile(r"^[ \t]*```[ \t]*(py(?!thon[ \t]*$)\S*.*)$", re.M)


@dataclass
class Block:
    line: int
    source: str
    not_run: str | None


def blocks(path: Path) -> list[Block]:
    text = path.read_text()
    found = []
    for match in FENCE.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = NOT_RUN.fullmatch(before.strip())
        found.append(
            Block(
                line=text.count("\n", 0, match.start("source")) + 1,
                source=textwrap.dedent(match.group("source")),
                not_run=marker.group("reason") if marker else None,
            )
        )
    return found


DOCUMENTS = [
    path.relative_to(ROOT).as_posix()
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    if "```python" in path.read_text()
]


def _redirect(monkeypatch: pytest.MonkeyPatch, addresses: dict[tuple[str, int], Any]) -> None:
    """Connections to an address of `addresses` go to (host, port) of its value."""
    for connection in (redis.connection.Connection, redis.asyncio.connection.Connection):
        original = connection.__init__

        def init(
            self: Any,
            host: str = "localhost",
            port: int | str = 6379,
            *args: Any,
            _original: Callable[..., None] = original,
            **kwargs: Any,
        ) -> None:
            host, port = addresses.get((host, int(port)), (host, port))
            _original(self, *args, host=host, port=port, **kwargs)

        monkeypatch.setattr(connection, "__init__", init)


@pytest.fixture
def _outside(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """docs/metrics.md: `prometheus_client.start_http_server(9100)` listens on a free
    loopback port instead (9100 may be taken), stopped after the document; the default
    registry's export and the counting it turned on end with the document too."""
    import prometheus_client

    import seawall.metrics

    started: list[Any] = []
    original = prometheus_client.start_http_server

    def start_http_server(port: int, addr: str = "0.0.0.0", **kwargs: Any) -> Any:
        server, thread = original(0, "127.0.0.1", **kwargs)
        started.append(server)
        return server, thread

    monkeypatch.setattr(prometheus_client, "start_http_server", start_http_server)
    yield
    for server in started:
        server.shutdown()
        server.server_close()
    seawall.metrics.unregister()


@contextlib.contextmanager
def _time_limit(seconds: float, where: str) -> Iterator[None]:
    """An example that blocks (a lock it never gets, a server it cannot reach) fails
    here, saying where, instead of holding the suite until its faulthandler timeout."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        raise TimeoutError(f"{where}: the example still runs after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _undefined_names(path: str) -> list[str]:
    """Names the document's examples use and never define (ruff's F821): a function body
    runs only when called, so running the blocks does not find those."""
    source = ""
    for block in blocks(ROOT / path):
        if block.not_run is None:
            source += "\n" * (block.line - 1 - source.count("\n")) + block.source
    found = subprocess.run(
        [
            sys.executable,
            "-m",
            "ruff",
            "check",
            "--isolated",
            "--select",
            "F821",
            "--target-version",
            "py311",
            "--output-format",
            "concise",
            "--no-cache",
            "--stdin-filename",
            f"{path}.py",  # ruff reads a .md file as Markdown
            "-",
        ],
        input=source,
        capture_output=True,
        text=True,
        check=False,
    )
    return [line for line in found.stdout.splitlines() if "F821" in line]


def _run(path: str, namespace: dict[str, Any], loop: asyncio.AbstractEventLoop) -> int:
    ran = 0
    for block in blocks(ROOT / path):
        if block.not_run is not None:
            continue
        # Line numbers of tracebacks are the document's.
        source = "\n" * (block.line - 1) + block.source
        code = compile(source, str(ROOT / path), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        with (
            _time_limit(BLOCK_SECONDS, f"{path}:{block.line}"),
            warnings.catch_warnings(record=True) as caught,
        ):
            warnings.simplefilter("default")
            result = eval(code, namespace)  # a coroutine when the block awaits at top level
            if asyncio.iscoroutine(result):
                loop.run_until_complete(result)
        for warning in caught:
            # A call of an asyncio client that the example forgot to await did nothing.
            if "was never awaited" in str(warning.message):
                pytest.fail(f"{path}:{block.line}: {warning.message}", pytrace=False)
            warnings.warn_explicit(
                warning.message, warning.category, warning.filename, warning.lineno
            )
        ran += 1
    return ran


@pytest.mark.parametrize("path", DOCUMENTS)
def test_document_examples_run(
    path: str,
    seawall_server_factory: Callable[..., Any],
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    assert not _undefined_names(path)
    server = seawall_server_factory()
    addresses: dict[tuple[str, int], Any] = dict.fromkeys(LOCAL, server.address)
    needs = NEEDS.get(path, set())
    if "masters" in needs:
        masters = [seawall_server_factory() for _ in MASTERS]
        addresses.update(zip(MASTERS, (m.address for m in masters), strict=True))
    if "sentinel" in needs:
        sentinel = SentinelGroup(service_name=SENTINEL_SERVICE).start()
        request.addfinalizer(sentinel.stop)
        addresses[SENTINEL] = sentinel.sentinel_addresses[0]
    if "metrics" in needs:
        request.getfixturevalue("_outside")
    if "etcd" in needs:  # examples read the member's URL from ETCD_URL
        monkeypatch.setenv("ETCD_URL", request.getfixturevalue("seawall_etcd").endpoint)
    _redirect(monkeypatch, addresses)
    monkeypatch.chdir(tmp_path)
    # A module of its own, in sys.modules: libraries that resolve a class's annotations
    # through its module (SQLAlchemy's Mapped[int], dataclasses, pydantic) find them there.
    module = types.ModuleType("docs_example_" + re.sub(r"\W", "_", path))
    monkeypatch.setitem(sys.modules, module.__name__, module)
    namespace: dict[str, Any] = module.__dict__
    loop = asyncio.new_event_loop()
    try:
        ran = _run(path, namespace, loop)
    finally:
        # What the examples made goes now, so its background work (lease renewal, the
        # invalidation listener) ends before the servers do.
        namespace.clear()
        gc.collect()
        # Then the loop ends as asyncio.run() ends one: its tasks cancelled and awaited.
        tasks = asyncio.all_tasks(loop)
        for task in tasks:
            task.cancel()
        if tasks:
            loop.run_until_complete(asyncio.wait(tasks))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
    # A document whose every block is marked (each naming why, or the test that runs it)
    # runs none here; any other ran at least one.
    assert ran or all(b.not_run for b in blocks(ROOT / path)), f"{path}: no example ran"


@pytest.mark.parametrize("path", DOCUMENTS)
def test_every_example_is_found_and_every_marker_names_what_exists(path: str) -> None:
    text = (ROOT / path).read_text()
    marked = [block for block in blocks(ROOT / path) if block.not_run is not None]
    assert len(marked) == len(NOT_RUN.findall(text)), f"{path}: a marker before no ```python"
    assert not LOOKALIKE.findall(text), f"{path}: write ```python and mark it not run instead"
    for block in marked:
        assert block.not_run
        for named in re.findall(r"tests/[\w/]+\.py", block.not_run or ""):
            assert (ROOT / named).is_file(), f"{path}:{block.line} names {named}: no such file"
