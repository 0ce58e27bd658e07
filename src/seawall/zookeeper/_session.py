"""One ZooKeeper session per connection string and session timeout, per process.

A session is a kazoo client: a connection, a background thread, and the ephemeral nodes
that live as long as the session does. Every seawall.zookeeper.Lock of a process (sync
or asyncio) that names the same hosts shares one, as every lock of a process shares one
redis-py connection pool; a forked child starts its own (the parent's session is not its).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import threading
import time
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError, SessionExpiredError
from kazoo.retry import KazooRetry

log = logging.getLogger("seawall")

# How long a background deletion keeps trying while the ensemble is unreachable.
DELETE_GIVE_UP = 600.0

_mutex = threading.Lock()
_sessions: dict[tuple[int, str, float], Any] = {}

# Reconnecting after the server restarts (or the network heals) must be quick: a session
# is only kept if the client is back within its timeout.
_RECONNECT = {"max_tries": -1, "delay": 0.05, "backoff": 2, "max_delay": 0.5}

# kazoo waits (session timeout / number of hosts) for a server to answer its connect
# request before trying again. Right after a restart a server may accept the connection
# and never answer that request; with one host kazoo then waits the whole session
# timeout, and the session expires before the next try (seen on a loaded machine, with
# the holds of that session lost). Listing each host this many times makes the wait a
# third of the session timeout, so two more tries fit in it.
_HANDSHAKE_SPLIT = 3


def session_for(hosts: str, session_timeout: float, connect_timeout: float) -> Any:
    """The started kazoo client of this process for `hosts`; connects on first use
    (TimeoutError if no server answered within `connect_timeout`)."""
    key = (os.getpid(), hosts, session_timeout)
    with _mutex:
        client = _sessions.get(key)
        if client is None:
            client = KazooClient(
                hosts=hosts,
                timeout=session_timeout,
                connection_retry=KazooRetry(**_RECONNECT),
            )
            client.hosts = list(client.hosts) * _HANDSHAKE_SPLIT
            try:
                client.start(timeout=max(connect_timeout, 0.1))
            except Exception as exc:
                client.close()
                raise TimeoutError(
                    f"no ZooKeeper server at {hosts} answered within {connect_timeout:g} s: "
                    "check the connection string and that the ensemble is up"
                ) from exc
            _sessions[key] = client
        return client


def delete_eventually(client: Any, path: str, *, pause: float = 0.05) -> None:
    """Delete our node `path` in the background, retrying (50 ms, doubling to 1 s) while
    the ensemble cannot be reached: a node that outlived its hold (given up, lost) must
    not block the lock while this process's session lives, which can be for ever.

    Runs on kazoo's own thread and timers, so it needs no event loop and never blocks
    the caller. Done when the node is gone, or went with an expired session."""
    started = time.monotonic()

    def attempt(delay: float) -> None:
        try:
            pending = client.delete_async(path)
        except Exception as exc:  # the client was closed: its session and nodes are gone
            log.debug("not deleting %s: %r", path, exc)
            return

        def done(result: Any) -> None:
            exc = result.exception
            if exc is None or isinstance(exc, NoNodeError | SessionExpiredError):
                return
            if time.monotonic() - started > DELETE_GIVE_UP or not is_open(client):
                log.warning("gave up deleting ZooKeeper node %s: %r", path, exc)
                return
            retry = threading.Timer(delay, attempt, args=(min(delay * 2, 1.0),))
            retry.daemon = True
            retry.start()

        pending.rawlink(done)

    attempt(pause)


def is_open(client: Any) -> bool:
    """Whether `client` is still one of this process's sessions (not closed)."""
    with _mutex:
        return any(each is client for each in _sessions.values())


def granted_timeout(client: Any, asked: float) -> float:
    """The session timeout the server granted (within its min and max), in seconds."""
    granted = getattr(client, "_session_timeout", None)
    return granted / 1000.0 if isinstance(granted, int | float) and granted > 0 else asked


@atexit.register
def close_all(hosts: str | None = None) -> None:
    """Stop this process's sessions (to `hosts` only, if given): before a test server
    stops, and at interpreter exit. Locks using them connect again on their next use."""
    with _mutex:
        keys = [key for key in _sessions if hosts is None or key[1] == hosts]
        clients = [_sessions.pop(key) for key in keys]
        clients = [c for key, c in zip(keys, clients, strict=True) if key[0] == os.getpid()]
    for client in clients:
        with contextlib.suppress(Exception):  # best effort at shutdown
            client.stop()
            client.close()
