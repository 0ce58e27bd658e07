"""Multi-process topologies: a real 3+3 Redis Cluster and master + replica + Sentinel."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest
import redis
import redis.cluster
from redis.crc import key_slot
from redis.exceptions import MovedError

from seawall.launcher import SLOT_COUNT, ClusterGroup, SentinelGroup, slot_ranges


def _one_key_per_slot() -> list[str]:
    keys: dict[int, str] = {}
    candidate = 0
    while len(keys) < SLOT_COUNT:
        key = f"slot-probe:{candidate}"
        keys.setdefault(key_slot(key.encode()), key)
        candidate += 1
    return [keys[slot] for slot in range(SLOT_COUNT)]


def _retry(action: Callable[[], object], timeout: float) -> object:
    """Run `action` until it stops raising connection errors (a client meeting a failover)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return action()
        except (redis.ConnectionError, redis.TimeoutError, redis.ReadOnlyError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


# -- Redis Cluster -----------------------------------------------------------------------


def test_slot_ranges_cover_every_slot_once() -> None:
    ranges = slot_ranges(3)
    assert ranges == [(0, 5460), (5461, 10921), (10922, 16383)]
    assert sum(last - first + 1 for first, last in slot_ranges(7)) == SLOT_COUNT


def test_cluster_forms_three_masters_each_with_a_replica(seawall_cluster: ClusterGroup) -> None:
    assert len(seawall_cluster.nodes) == 6
    for node in seawall_cluster.nodes:
        assert node.port <= 55535  # the cluster bus needs port + 10000
        with node.client(decode_responses=True) as client:
            assert "cluster_state:ok" in client.execute_command("CLUSTER", "INFO")
    masters = seawall_cluster.masters
    assert len(masters) == 3
    assert len(seawall_cluster.replicas) == 3
    replica_ports = set()
    for master in masters:
        replicas = seawall_cluster.replicas_of(master)
        assert len(replicas) == 1
        with replicas[0].client(decode_responses=True) as client:
            replication = client.info("replication")
        assert replication["master_port"] == master.port
        assert replication["master_link_status"] == "up"
        replica_ports.add(replicas[0].port)
    assert len(replica_ports) == 3


def test_cluster_client_reaches_every_slot(
    seawall_cluster: ClusterGroup, seawall_cluster_client: redis.cluster.RedisCluster
) -> None:
    keys = _one_key_per_slot()
    pipe = seawall_cluster_client.pipeline(transaction=False)
    for key in keys:
        pipe.set(key, key)
    assert all(pipe.execute())
    assert seawall_cluster_client.mget_nonatomic(keys) == [key.encode() for key in keys]
    sizes = []
    for master in seawall_cluster.masters:
        with master.client() as client:
            sizes.append(client.dbsize())
    assert sorted(sizes) == [5461, 5461, 5462]


def test_cluster_is_flushed_between_tests(
    seawall_cluster_client: redis.cluster.RedisCluster,
) -> None:
    assert seawall_cluster_client.dbsize() == 0


def test_master_for_key_owns_the_key(
    seawall_cluster: ClusterGroup, seawall_cluster_client: redis.cluster.RedisCluster
) -> None:
    seawall_cluster_client.set("{order}:1", "paid")
    owner = seawall_cluster.master_for_key("{order}:1")
    with owner.client() as client:
        assert client.get("{order}:1") == b"paid"
    stranger = next(node for node in seawall_cluster.masters if node is not owner)
    with stranger.client() as client, pytest.raises(MovedError) as moved:
        client.get("{order}:1")
    assert str(moved.value) == f"{key_slot(b'{order}:1')} 127.0.0.1:{owner.port}"


def test_async_cluster_client(seawall_cluster: ClusterGroup) -> None:
    async def roundtrip() -> list[bytes | None]:
        client = seawall_cluster.async_client()
        try:
            for index in range(30):
                await client.set(f"async:{index}", index)
            return [await client.get(f"async:{index}") for index in range(30)]
        finally:
            await client.aclose()

    assert asyncio.run(roundtrip()) == [str(index).encode() for index in range(30)]


def test_killed_cluster_master_fails_over_to_its_replica(
    seawall_cluster_factory: Callable[..., ClusterGroup],
) -> None:
    cluster = seawall_cluster_factory()
    client = cluster.client()
    try:
        client.set("{stock}:1", 100)
        client.wait(1, 1000)  # the replica must hold the value before the crash
        doomed = cluster.master_for_key("{stock}:1")
        (heir,) = cluster.replicas_of(doomed)
        doomed.kill()
        started = time.monotonic()
        cluster.wait_healthy(timeout=15)
        assert time.monotonic() - started < 15
        assert cluster.master_for_key("{stock}:1") is heir
        assert _retry(lambda: client.get("{stock}:1"), timeout=10) == b"100"
        cluster.heal()
        assert doomed.running
        assert cluster.replicas_of(heir) == [doomed]
    finally:
        client.close()


# -- Sentinel ----------------------------------------------------------------------------


def test_sentinel_serves_master_and_replicates(seawall_sentinel: SentinelGroup) -> None:
    assert seawall_sentinel.service_name == "seawall"
    assert seawall_sentinel.sentinel_addresses == [
        ("127.0.0.1", s.port) for s in seawall_sentinel.sentinels
    ]
    client = seawall_sentinel.master_client()
    try:
        client.set("greeting", "hello")
        assert client.wait(1, 1000) == 1
        with seawall_sentinel.replica.client() as replica:
            assert replica.get("greeting") == b"hello"
        with seawall_sentinel.master.client() as master:
            assert master.get("greeting") == b"hello"
        assert seawall_sentinel.current_master() is seawall_sentinel.master
    finally:
        client.close()


def test_sentinel_promotes_replica_when_master_is_killed(seawall_sentinel: SentinelGroup) -> None:
    client = seawall_sentinel.master_client(socket_timeout=1)
    try:
        client.set("order:7", "paid")
        assert client.wait(1, 1000) == 1
        seawall_sentinel.master.kill()
        started = time.monotonic()
        address = seawall_sentinel.wait_for_failover(timeout=10)
        elapsed = time.monotonic() - started
        assert address == seawall_sentinel.replica.address
        assert elapsed < 10
        assert seawall_sentinel.current_master() is seawall_sentinel.replica
        # The same client object finds the new master through the sentinel.
        assert _retry(lambda: client.set("order:8", "paid"), timeout=5) is True
        assert client.get("order:7") == b"paid"
    finally:
        client.close()
