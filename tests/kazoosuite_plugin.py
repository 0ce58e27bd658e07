"""pytest plugin that runs kazoo's own lock tests with seawall.zookeeper.Lock.

Loaded by test_cp_lock_peer_suites.py (`-p kazoosuite_plugin`) into a pytest run of
kazoo/tests/test_lock.py from kazoo's sdist. kazoo's tests are not changed; the plugin:

- gives kazoo's harness (KazooTestCase) the private ZooKeeper at
  $SEAWALL_KAZOO_SUITE_HOSTS instead of the 3-server cluster it would build from a
  ZooKeeper install (one server: the lock tests never stop one);
- makes the harness's `self.client` seawall's session for the test's hosts (the kazoo
  client every seawall.zookeeper.Lock of the process shares), so kazoo's
  `expire_session()` expires the session seawall's locks live in;
- makes `client.Lock(path, identifier)` an adapter (SeawallLock) holding a
  seawall.zookeeper.Lock named `path`; all clients of a test share seawall's one session,
  contenders being told apart by thread, as seawall does in a process; kazoo's
  `contenders()` reads identifiers that kazoo writes as node data, and seawall's nodes
  carry none, so the identifier goes into the random token of seawall's node name;
- when a test fails, sets the events it made (make_event), so that its helper threads,
  which wait on them without a timeout, end and the harness's tearDown can join them.
"""

from __future__ import annotations

import os
import sys
import threading
import types
from collections.abc import Callable
from functools import wraps
from typing import Any

# kazoo's cluster builder (kazoo.testing.common, imported by its harness) makes TLS
# certificates with pyOpenSSL and pyjks, kazoo's test extras; the cluster is replaced
# below, so they are never called and empty modules stand in for them.
for _missing in ("OpenSSL", "jks"):
    try:
        __import__(_missing)
    except ImportError:
        sys.modules[_missing] = types.ModuleType(_missing)

import kazoo.client  # noqa: E402
from kazoo.exceptions import LockTimeout, NoNodeError  # noqa: E402
from kazoo.testing import harness  # noqa: E402
from kazoo.tests import test_lock  # noqa: E402
from peersuites import outcome_recorder  # noqa: E402

import seawall.zookeeper  # noqa: E402
from seawall.zookeeper import _core  # noqa: E402
from seawall.zookeeper._session import close_all, session_for  # noqa: E402

HOSTS = os.environ["SEAWALL_KAZOO_SUITE_HOSTS"]
# The session seawall's locks share here. kazoo's expire_session() only makes the client
# give up its session and open a new one; the server keeps the old session (and a
# waiter's node that was queued in it, if deleting it raced the reconnection) until this
# timeout, which bounds how long test_lock_reconnect can wait.
SESSION_TIMEOUT = 5.0

pytest_runtest_logreport, pytest_sessionfinish = outcome_recorder()


# -- the harness's cluster: the private server --------------------------------------------


class _Server:
    address = HOSTS
    running = True


class _PrivateServer(list[_Server]):
    def start(self) -> None: ...
    def stop(self) -> None: ...
    def terminate(self) -> None: ...
    def get_logs(self) -> list[str]:
        return []


_CLUSTER = _PrivateServer([_Server()])
harness.get_global_cluster = lambda: _CLUSTER
harness.KazooTestHarness.cluster = property(lambda self: _CLUSTER)  # type: ignore[assignment]

_test_hosts = {"current": ""}
_setup = harness.KazooTestHarness.setup_zookeeper
_teardown = harness.KazooTestHarness.teardown_zookeeper


def _setup_zookeeper(self: Any, **options: Any) -> None:
    _setup(self, **options)  # a chroot of its own per test: self.hosts ends /kazootests<uuid>
    _test_hosts["current"] = self.hosts
    self.client = session_for(self.hosts, SESSION_TIMEOUT, 15.0)


def _teardown_zookeeper(self: Any) -> None:
    _teardown(self)
    close_all(self.hosts)


harness.KazooTestHarness.setup_zookeeper = _setup_zookeeper  # type: ignore[method-assign]
harness.KazooTestHarness.teardown_zookeeper = _teardown_zookeeper  # type: ignore[method-assign]


# -- kazoo's Lock API over seawall.zookeeper.Lock ----------------------------------------

# kazoo writes a contender's identifier into its node for contenders() to read; seawall's
# nodes carry no data, so the identifier goes into the random token of the node's name
# (n-{token}-{sequence}), which changes nothing else.
_naming = threading.local()
_random_token = _core.new_token


def _token() -> str:
    identifier: str = getattr(_naming, "identifier", "")
    return f"{identifier.encode().hex()}x{_random_token()}"


_core.new_token = _token


def _identifier_of(child: str) -> str:
    token = child[len(_core.NODE_PREFIX) : -11]
    return bytes.fromhex(token.rsplit("x", 1)[0]).decode()


class SeawallLock:
    """kazoo.recipe.lock.Lock's API (those of its parts seawall has) over one
    seawall.zookeeper.Lock named by kazoo's lock path."""

    def __init__(
        self, client: Any, path: str, identifier: Any = None, extra_lock_patterns: Any = ()
    ) -> None:
        self.client = client
        self.path = path
        self.identifier = str(identifier or "")
        self.lock = seawall.zookeeper.Lock(
            _test_hosts["current"], path, session_timeout=SESSION_TIMEOUT
        )

    # kazoo: acquire(blocking=True, timeout=None, ephemeral=True); seawall's nodes are
    # always ephemeral, so there is no `ephemeral`.
    def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        _naming.identifier = self.identifier
        try:
            if not blocking:  # kazoo ignores a timeout then; seawall refuses the pair
                return self.lock.acquire(blocking=False)
            gotten = self.lock.acquire(timeout=timeout)
        finally:
            _naming.identifier = ""
        if not gotten:  # kazoo raises where seawall returns False
            raise LockTimeout(f"Failed to acquire lock on {self.path} after {timeout} seconds")
        return True

    def release(self) -> bool:
        self.lock.release()
        return True

    @property
    def is_acquired(self) -> bool:
        return self.lock.owned()

    def contenders(self) -> list[str]:
        try:
            children = self.client.get_children(self.lock.path)
        except NoNodeError:
            return []
        queued = [(seq, c) for c in children if (seq := _core.sequence_of(c)) is not None]
        return [_identifier_of(child) for _, child in sorted(queued)]

    def __enter__(self) -> None:
        self.acquire()

    def __exit__(self, *_: object) -> None:
        self.release()


kazoo.client.Lock = SeawallLock  # type: ignore[misc,assignment]  # KazooClient: partial(Lock, self)


# -- a failed test frees its helper threads ------------------------------------------------

_events: list[threading.Event] = []


def _make_event() -> threading.Event:
    event = threading.Event()
    _events.append(event)
    return event


def _freeing_threads(test: Callable[[Any], Any]) -> Callable[[Any], Any]:
    @wraps(test)
    def run(self: Any) -> Any:
        _events.clear()
        try:
            return test(self)
        except BaseException:
            for event in _events:
                event.set()
            raise

    return run


test_lock.KazooLockTests.make_event = staticmethod(_make_event)  # type: ignore[method-assign]
for _name in dir(test_lock.KazooLockTests):
    if _name.startswith("test_"):
        setattr(
            test_lock.KazooLockTests,
            _name,
            _freeing_threads(getattr(test_lock.KazooLockTests, _name)),
        )
