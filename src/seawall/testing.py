"""pytest fixtures that run real redis/valkey servers: for seawall's suite and for yours.

Installed as the ``seawall`` pytest plugin (entry point ``pytest11``), so the fixtures are
available wherever seawall is installed. Every name starts with ``seawall_`` so none can
clash with a project's own fixtures.

Servers bind 127.0.0.1 on free ports. Long-lived topologies are session-scoped and reset
per test (FLUSHALL); anything a test may kill, pause or restart is function-scoped. A
missing server binary fails the test with the install instructions; it never skips,
because a skipped test proves nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
import redis
import redis.cluster

from seawall.errors import ServerNotFoundError
from seawall.launcher import (
    ClusterGroup,
    SentinelGroup,
    ServerProcess,
    find_server_binary,
    start_all,
    stop_all,
)
from seawall.launcher._mariadb import MariaDBProcess

__all__ = [
    "seawall_cluster",
    "seawall_cluster_client",
    "seawall_cluster_factory",
    "seawall_etcd",
    "seawall_mariadb",
    "seawall_master_clients",
    "seawall_masters",
    "seawall_masters_factory",
    "seawall_postgres",
    "seawall_redis",
    "seawall_sentinel",
    "seawall_server",
    "seawall_server_factory",
    "seawall_url",
    "seawall_zookeeper",
]

MASTER_COUNT = 5

_T = TypeVar("_T")


def _launch(make: Callable[[], _T]) -> _T:
    try:
        return make()
    except ServerNotFoundError as exc:
        pytest.fail(f"seawall cannot start a test server: {exc}", pytrace=False)


def _revive(server: ServerProcess) -> None:
    # A session server that an earlier test froze or killed must not fail the next test.
    if server.paused:
        server.resume()
    elif not server.running:
        server.restart()


def _flushed_client(server: ServerProcess) -> redis.Redis:
    _revive(server)
    client = server.client()
    client.flushall()
    return client


# -- one server ------------------------------------------------------------------------


@pytest.fixture(scope="session")
def seawall_server() -> Iterator[ServerProcess]:
    """One server for the whole session. Use `seawall_redis` or `seawall_url` to get it
    flushed; use `seawall_server_factory` for a server the test may kill or pause."""
    server = _launch(lambda: ServerProcess().start())
    yield server
    server.stop()


@pytest.fixture
def seawall_redis(seawall_server: ServerProcess) -> Iterator[redis.Redis]:
    """A redis.Redis on the session server, emptied before the test, closed after it."""
    client = _flushed_client(seawall_server)
    yield client
    client.close()


@pytest.fixture
def seawall_url(seawall_server: ServerProcess) -> str:
    """The session server's URL (``redis://127.0.0.1:PORT/0``), emptied before the test."""
    _flushed_client(seawall_server).close()
    return seawall_server.url


@pytest.fixture
def seawall_server_factory() -> Iterator[Callable[..., ServerProcess]]:
    """``factory(**ServerProcess kwargs) -> started ServerProcess``, all stopped after the
    test: for fault tests (kill, pause, restart with ``appendonly=True``)."""
    started: list[ServerProcess] = []

    def factory(**kwargs: Any) -> ServerProcess:
        server = _launch(lambda: ServerProcess(**kwargs))
        started.append(server)
        return server.start()

    yield factory
    stop_all(started)


# -- independent masters (Redlock) -------------------------------------------------------


@pytest.fixture(scope="session")
def seawall_masters() -> Iterator[list[ServerProcess]]:
    """Five independent masters for the session; `seawall_master_clients` empties them."""
    binary = _launch(find_server_binary)
    masters = [ServerProcess(binary=binary) for _ in range(MASTER_COUNT)]
    start_all(masters)
    yield masters
    stop_all(masters)


@pytest.fixture
def seawall_master_clients(seawall_masters: list[ServerProcess]) -> Iterator[list[redis.Redis]]:
    """One redis.Redis per session master, each emptied before the test."""
    clients = [_flushed_client(master) for master in seawall_masters]
    yield clients
    for client in clients:
        client.close()


@pytest.fixture
def seawall_masters_factory() -> Iterator[Callable[..., list[ServerProcess]]]:
    """``factory(count, **ServerProcess kwargs) -> started masters``, stopped after the
    test: for Redlock fault tests that kill or pause some of them."""
    started: list[ServerProcess] = []

    def factory(count: int, **kwargs: Any) -> list[ServerProcess]:
        binary = _launch(find_server_binary)
        kwargs.setdefault("binary", binary)
        masters = [ServerProcess(**kwargs) for _ in range(count)]
        started.extend(masters)
        start_all(masters)
        return masters

    yield factory
    stop_all(started)


# -- Redis Cluster ---------------------------------------------------------------------


@pytest.fixture(scope="session")
def seawall_cluster() -> Iterator[ClusterGroup]:
    """A 3 master + 3 replica Redis Cluster for the session (forms in about 2 s)."""
    cluster = _launch(lambda: ClusterGroup().start())
    yield cluster
    cluster.stop()


@pytest.fixture
def seawall_cluster_client(
    seawall_cluster: ClusterGroup,
) -> Iterator[redis.cluster.RedisCluster]:
    """A RedisCluster on the session cluster, emptied (and healed) before the test."""
    if any(node.paused or not node.running for node in seawall_cluster.nodes):
        seawall_cluster.heal()
    seawall_cluster.flushall()
    client = seawall_cluster.client()
    yield client
    client.close()


@pytest.fixture
def seawall_cluster_factory() -> Iterator[Callable[..., ClusterGroup]]:
    """``factory(**ClusterGroup kwargs) -> formed cluster``, stopped after the test: for
    fault tests that kill or pause nodes (see `ClusterGroup.master_for_key`)."""
    started: list[ClusterGroup] = []

    def factory(**kwargs: Any) -> ClusterGroup:
        cluster = _launch(lambda: ClusterGroup(**kwargs))
        started.append(cluster)
        return cluster.start()

    yield factory
    for cluster in started:
        cluster.stop()


# -- Sentinel --------------------------------------------------------------------------


@pytest.fixture
def seawall_sentinel() -> Iterator[SentinelGroup]:
    """Master + replica + one Sentinel (service ``seawall``), fresh per test because
    tests kill its master; `wait_for_failover()` returns the promoted address."""
    group = _launch(lambda: SentinelGroup().start())
    yield group
    group.stop()


# -- PostgreSQL with logical decoding (the change-log follower) ------------------------


@pytest.fixture(scope="session")
def seawall_postgres() -> Iterator[Any]:
    """A private PostgreSQL (wal_level=logical, superuser `postgres`, trust on 127.0.0.1)
    for the session: a `seawall.launcher._postgres.PostgresProcess`. Give each test its
    own database (CREATE DATABASE) and slot names; never the system server."""
    from seawall.launcher._postgres import INSTALL_HINT, PostgresNotFoundError, PostgresProcess

    try:
        server = PostgresProcess().start()
    except PostgresNotFoundError:
        pytest.fail(f"seawall cannot start PostgreSQL: {INSTALL_HINT}", pytrace=False)
    yield server
    server.stop()


# -- MariaDB (change-log follower tests) --------------------------------------------------


@pytest.fixture(scope="session")
def seawall_mariadb() -> Iterator[MariaDBProcess]:
    """A private MariaDB for the session (row binlog, GTIDs, user root without a
    password); give each test its own database. Tests may kill() and restart() it:
    check `running` and restart() before use."""
    server = _launch(lambda: MariaDBProcess().start())
    yield server
    server.stop()


# -- CP lock backends: etcd and ZooKeeper ----------------------------------------------


@pytest.fixture(scope="session")
def seawall_etcd() -> Iterator[Any]:
    """A private single-member etcd for the session (`.endpoint` is its client URL);
    fails naming the Debian package (etcd-server) when the binary is missing. A test that
    pauses, kills or restarts it leaves it running again for the next test."""
    from seawall.launcher._etcd import EtcdProcess

    server = _launch(lambda: EtcdProcess().start())
    yield server
    server.stop()


@pytest.fixture(scope="session")
def seawall_zookeeper() -> Iterator[Any]:
    """A private standalone ZooKeeper for the session (`.hosts` is its connection
    string); fails naming the Debian package (zookeeper) when it is missing."""
    from seawall.launcher._zookeeper import ZooKeeperProcess

    server = _launch(lambda: ZooKeeperProcess().start())
    yield server
    try:
        from seawall.zookeeper._session import close_all
    except ImportError:  # kazoo not installed: no session to close
        pass
    else:
        close_all(server.hosts)  # before the server goes, or kazoo retries for ever
    server.stop()
