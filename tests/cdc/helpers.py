"""Small waits shared by the follower tests (bounded, woken often: never a fixed sleep)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from typing import Any

from waiting import wait_until as wait_until  # re-exported: the cdc tests' wait

from seawall.cache._codec import cache_keys


def in_redis(client: Any, namespace: str, key: Any) -> bool:
    """Whether Redis (L2) holds an entry (a value or a cached "absent") for `key`."""
    return bool(client.exists(cache_keys(namespace, str(key)).value))


class FollowerProcess:
    """`seawall follow` in its own process (so it can be SIGKILLed), its log in a file."""

    def __init__(self, log_dir: Any, source_url: str, redis_url: str, *args: str) -> None:
        self.log_path = os.path.join(str(log_dir), f"follower-{uuid.uuid4().hex[:8]}.log")
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        argv = [sys.executable, "-m", "seawall", "follow", source_url, "--redis", redis_url]
        # With faulthandler on, a follower that does not stop in time is made to show
        # where each of its threads stands (SIGABRT) before it is killed: see stop().
        env = {**os.environ, "PYTHONFAULTHANDLER": "1"}
        self.proc = subprocess.Popen(
            [*argv, *args],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
        )
        self.stuck: str | None = None  # the log, if SIGTERM did not stop it within 10 s

    def log(self) -> str:
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def wait_streaming(self, timeout: float = 20.0) -> None:
        wait_until(
            lambda: "streaming" in self.log() or self.proc.poll() is not None,
            timeout,
            f"the follower streams; its log:\n{self.log()}",
        )
        assert self.proc.poll() is None, f"the follower exited:\n{self.log()}"

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.send_signal(signal.SIGABRT)  # faulthandler writes the stacks
                try:
                    self.proc.wait(5)
                except subprocess.TimeoutExpired:
                    self.kill()
                self.stuck = self.log()
        self._log.close()


def l1_watcher(redis_url: str, namespace: str, key: int, pipe: Any) -> None:
    """Another process: cache `key` in its L1, say so, then report how long until the
    L1 no longer holds it (or -1 after 10 s)."""
    import redis

    import seawall
    from seawall.cache._l1 import MISSING

    client = redis.Redis.from_url(redis_url)
    cache = seawall.Cache(client, namespace, l1_ttl=600.0)
    listener = cache._listener()
    assert listener is not None and listener.wait_listening(10)
    cache.get_or_load(key, lambda: "old")
    assert cache.l1.get(str(key)) == "old"
    pipe.send("cached")
    pipe.recv()  # the row changes now
    deadline = time.monotonic() + 10
    while cache.l1.get(str(key)) is not MISSING:
        if time.monotonic() > deadline:
            pipe.send(-1.0)
            return
        time.sleep(0.001)
    pipe.send(1.0)
    client.close()


def checkpoint_name(source_url: str, table: str = "users") -> str:
    """What the follower of `source_url` keeps its checkpoint (and elects) under."""
    from seawall.cdc._sources import open_source

    source = open_source(source_url)
    try:
        watch = getattr(source, "watch", None)
        if watch is not None:
            watch({table: None})
        return getattr(source, "election_name", None) or source.name
    finally:
        source.close()
