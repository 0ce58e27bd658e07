"""Code that runs in a child process of the clear() tests (multiprocessing "spawn")."""

from __future__ import annotations

import time
from multiprocessing.connection import Connection

from lockworkers import sync_client

import seawall


def read_across_clear(url: str, cluster: bool, name: str, pipe: Connection) -> None:
    """Hold key "k" in this process's L1, then read it without pause until told to stop.

    Sends "ready" once the value is held, "told" once the L1 epoch has moved, then
    (monotonic time, L1 epoch before the read, value) for every read. Nothing else
    writes to the namespace, so the L1 epoch moves only when the clear's message empties
    the L1.
    """
    r = sync_client(url, cluster)
    cache = seawall.Cache(r, name, ttl=300, l1_ttl=60)
    assert cache._invalidator_here().wait_listening(10), "the listener never subscribed"
    deadline = time.monotonic() + 10
    while cache.l1.get("k") != "old":  # a fill needs the listener's generation first
        assert time.monotonic() < deadline, "key k never reached the L1"
        assert cache.get("k") == "old"
        time.sleep(0.01)
    pipe.send("ready")
    reads = []
    first_epoch = cache.l1.epoch
    told = False
    while not pipe.poll(0):
        epoch = cache.l1.epoch
        reads.append((time.monotonic(), epoch, cache.get("k")))
        if epoch != first_epoch and not told:
            pipe.send("told")  # the parent reads on a while, then says stop
            told = True
        time.sleep(0.0005)
    pipe.send(reads)
    r.close()
