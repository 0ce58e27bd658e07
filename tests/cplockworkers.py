"""Processes for the etcd and ZooKeeper lock tests (run under a forkserver)."""

from __future__ import annotations

import os
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

import redis

import seawall
import seawall.etcd  # imported here, so the forkserver's children start with them
import seawall.zookeeper


def make_lock(backend: str, address: str, name: str, ttl: float = 10.0, **kwargs: Any) -> Any:
    """A sync lock of `backend`; `ttl` is the etcd lease or the ZooKeeper session timeout."""
    if backend == "etcd":
        return seawall.etcd.Lock(address, name, ttl=ttl, **kwargs)
    return seawall.zookeeper.Lock(address, name, session_timeout=ttl, **kwargs)


def ledger(backend: str, address: str, name: str, path: str, rounds: int) -> None:
    """Take the lock `rounds` times; inside, write "in"/"out" ledger lines around a
    read-modify-write of a counter file. Any overlap shows as interleaved lines or a
    lost increment."""
    lock = make_lock(backend, address, name)
    me = os.getpid()
    for _ in range(rounds):
        with lock:
            fence = lock.fence
            with open(path + ".ledger", "a") as out:
                out.write(f"in {me} {fence}\n")
            with open(path) as counter:
                value = int(counter.read() or 0)
            time.sleep(0.001)
            with open(path, "w") as counter:
                counter.write(str(value + 1))
            with open(path + ".ledger", "a") as out:
                out.write(f"out {me} {fence}\n")


def holder(
    backend: str, address: str, name: str, ttl: float, redis_url: str, pipe: Connection
) -> None:
    """Hold the lock and report its fence; on "write", write late under that fence and
    report (fenced write accepted, owned(), what release() did, on_lost fired)."""
    lost = threading.Event()
    lock = make_lock(backend, address, name, ttl, on_lost=lambda _: lost.set())
    lock.acquire()
    pipe.send(lock.fence)
    if pipe.recv() != "write":
        return
    # Its renewer runs again with the process and finds the lease deadline long past.
    fired = lost.wait(5.0)
    client = redis.Redis.from_url(redis_url)
    wrote = seawall.fenced_write(client, f"ledger:{name}", "late", lock.fence)
    owned = lock.owned()
    try:
        lock.release()
        released = "released"
    except seawall.LockNotOwnedError:
        released = "not owned"
    pipe.send((wrote, owned, released, fired))
