"""A plain redis.Redis (or redis.asyncio.Redis) pointed at one node of a Redis Cluster:
the first command for a key of another node fails with one error that names
redis.cluster.RedisCluster, not a raw MOVED; and no background worker retries for ever."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest
import redis
import redis.asyncio

import seawall
import seawall.aio
from seawall.errors import ClusterClientError


def _elsewhere(node_client: redis.Redis, prefix: str) -> str:
    """A key whose slot the node does not serve."""
    return next(f"{prefix}{i}" for i in range(1000) if _moved(node_client, f"{prefix}{i}"))


def test_sync_primitives_name_the_cluster_client(seawall_cluster: Any) -> None:
    port = seawall_cluster.nodes[0].port
    plain = redis.Redis(port=port)
    name = _elsewhere(plain, "orders:")
    cache = seawall.Cache(plain, "plain", ttl=60)
    with pytest.raises(ClusterClientError, match=r"redis\.cluster\.RedisCluster") as caught:
        cache.get(name)
    assert f"localhost:{port}" in str(caught.value) and "MOVED" in str(caught.value)
    assert isinstance(caught.value, TypeError)
    with pytest.raises(ClusterClientError, match=r"RedisCluster\.from_url"):
        seawall.Lock(plain, name, ttl=5).acquire(timeout=1)
    plain.close()


def test_asyncio_primitives_name_the_asyncio_cluster_client(seawall_cluster: Any) -> None:
    port = seawall_cluster.nodes[0].port
    probe = redis.Redis(port=port)
    name = _elsewhere(probe, "carts:")
    probe.close()

    async def scenario() -> None:
        plain = redis.asyncio.Redis(port=port)
        cache = seawall.aio.Cache(plain, "plain-aio", ttl=60)
        with pytest.raises(ClusterClientError, match=r"redis\.asyncio\.cluster\.RedisCluster"):
            await cache.get(name)
        await plain.aclose()

    asyncio.run(scenario())


def test_the_second_delete_sweeper_stops_with_one_error(
    seawall_cluster: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A namespace whose schedule lives on another node: the sweeper's first look fails,
    and it says so once instead of retrying in the background for as long as it runs."""
    plain = redis.Redis(port=seawall_cluster.nodes[0].port)
    namespace = next(
        f"sweep{i}" for i in range(1000) if _moved(plain, f"seawall:cache-again:{{sweep{i}}}")
    )

    def stops() -> list[logging.LogRecord]:
        # This namespace's only: another test's cache on the same plain client may say
        # its own line late, while this one runs.
        said = [r for r in caplog.records if "second deletes stop" in r.getMessage()]
        return [r for r in said if f"cache {namespace!r}:" in r.getMessage()]

    with caplog.at_level(logging.DEBUG, logger="seawall"):
        cache = seawall.Cache(plain, namespace, ttl=60)
        cache._slots()  # opens the namespace here
        deadline = time.monotonic() + 10
        while not stops():
            assert time.monotonic() < deadline, "the sweeper said nothing"
            time.sleep(0.05)
        time.sleep(1.0)  # room for a retry, had it gone on retrying
    said = stops()
    assert len(said) == 1 and said[0].levelno == logging.ERROR, caplog.records
    assert "redis.cluster.RedisCluster" in said[0].getMessage()
    plain.close()


def _moved(client: redis.Redis, key: str) -> bool:
    try:
        client.exists(key)
    except redis.exceptions.ResponseError:
        return True
    return False
