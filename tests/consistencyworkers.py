"""Processes for the cache-consistency tests (spawned: importable by name)."""

from __future__ import annotations

import os
import signal
from typing import Any

import redis
import redis.cluster

import seawall


def client(url: str, cluster: bool) -> Any:
    if cluster:
        return redis.cluster.RedisCluster.from_url(url)
    return redis.Redis.from_url(url)


def delete_twice_then_die(url: str, cluster: bool, namespace: str, key: str, again: float) -> None:
    """Delete with a delayed second delete, then die at once (SIGKILL: no cleanup at all)."""
    cache = seawall.Cache(client(url, cluster), namespace)
    cache.delete(key, again_after=again)
    os.kill(os.getpid(), signal.SIGKILL)
