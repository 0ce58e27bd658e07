"""Master + replica watched by Sentinel, on loopback, ready for failover tests."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any, Self

import redis
import redis.sentinel

from seawall.launcher._binary import ServerBinary, find_server_binary, sentinel_args
from seawall.launcher._process import HOST, ServerProcess, ServerStartError, start_all, stop_all
from seawall.launcher._supervised import Managed

__all__ = ["SentinelGroup", "SentinelProcess"]

_POLL = 0.02


class SentinelProcess(ServerProcess):
    """A server in sentinel mode, monitoring one master under `service_name`.

    The config file lives in the process directory because Sentinel rewrites it to
    remember what it learned (replicas, other sentinels, failovers) across restarts.
    """

    def __init__(
        self,
        *,
        master: tuple[str, int],
        service_name: str = "seawall",
        quorum: int = 1,
        down_after_ms: int = 1000,
        failover_timeout_ms: int = 3000,
        binary: ServerBinary | None = None,
        start_timeout: float = 10.0,
    ) -> None:
        super().__init__(binary=binary, start_timeout=start_timeout)
        self.monitored = master
        self.service_name = service_name
        self.quorum = quorum
        self.down_after_ms = down_after_ms
        self.failover_timeout_ms = failover_timeout_ms

    @property
    def config_path(self) -> str:
        return os.path.join(self.directory, "sentinel.conf")

    def _argv(self) -> list[str]:
        # Written once: on restart Sentinel must find its own rewritten state, which may
        # name a different master after a failover.
        if not os.path.exists(self.config_path):
            host, port = self.monitored
            name = self.service_name
            with open(self.config_path, "w", encoding="utf-8") as conf:
                conf.write(
                    f"sentinel monitor {name} {host} {port} {self.quorum}\n"
                    f"sentinel down-after-milliseconds {name} {self.down_after_ms}\n"
                    f"sentinel failover-timeout {name} {self.failover_timeout_ms}\n"
                    f"sentinel parallel-syncs {name} 1\n"
                )
        # Options after --sentinel override the file, so a retried port takes effect.
        return [
            self.binary.path,
            self.config_path,
            *sentinel_args(self.binary),
            *self._common_args(),
        ]


class SentinelGroup(Managed):
    """One master, one replica and `sentinels` sentinels watching them as `service_name`.

    `master` and `replica` keep naming the processes they started as; after a failover
    `current_master()` tells which one leads now.
    """

    def __init__(
        self,
        *,
        sentinels: int = 1,
        service_name: str = "seawall",
        binary: ServerBinary | None = None,
        down_after_ms: int = 1000,
        failover_timeout_ms: int = 3000,
        appendonly: bool = False,
        start_timeout: float = 15.0,
    ) -> None:
        if sentinels < 1:
            raise ValueError("a SentinelGroup needs at least one sentinel")
        self.binary = binary if binary is not None else find_server_binary()
        self.service_name = service_name
        self.sentinel_count = sentinels
        self.down_after_ms = down_after_ms
        self.failover_timeout_ms = failover_timeout_ms
        self.start_timeout = start_timeout
        self.master = ServerProcess(binary=self.binary, appendonly=appendonly)
        self.replica = ServerProcess(binary=self.binary, appendonly=appendonly)
        self.sentinels: list[SentinelProcess] = []
        self._leader: tuple[str, int] | None = None
        self._discovery: redis.sentinel.Sentinel | None = None

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> Self:
        try:
            start_all([self.master, self.replica])
            with self.replica.client() as replica:
                # The command connects at once; --replicaof waits for the once-a-second cron.
                replica.replicaof(HOST, self.master.port)
            self._wait(self._replica_linked, "see the replica link up to its master")
            # Started only now: a sentinel learns replicas from its first INFO to the
            # master, and the next one comes 10 s later.
            majority = self.sentinel_count // 2 + 1
            self.sentinels = [
                SentinelProcess(
                    master=self.master.address,
                    service_name=self.service_name,
                    quorum=majority,
                    down_after_ms=self.down_after_ms,
                    failover_timeout_ms=self.failover_timeout_ms,
                    binary=self.binary,
                )
                for _ in range(self.sentinel_count)
            ]
            start_all(self.sentinels)
            self._wait(self._sentinels_ready, "see the master, the replica and each other")
        except BaseException:
            self.stop()
            raise
        self._leader = self.master.address
        return self

    def stop(self) -> None:
        if self._discovery is not None:
            _close_sentinel(self._discovery)
            self._discovery = None
        stop_all([*self.sentinels, self.master, self.replica])

    # -- topology and clients ------------------------------------------------------------

    @property
    def sentinel_addresses(self) -> list[tuple[str, int]]:
        return [sentinel.address for sentinel in self.sentinels]

    def sentinel_client(self, **kwargs: Any) -> redis.sentinel.Sentinel:
        """A redis-py Sentinel over every sentinel of the group."""
        kwargs.setdefault("socket_timeout", 2.0)
        return redis.sentinel.Sentinel(  # type: ignore[no-untyped-call]
            self.sentinel_addresses, **kwargs
        )

    def master_client(self, **kwargs: Any) -> redis.Redis:
        """A client that asks the sentinels where the master is, and asks again after errors.

        The caller closes it; the sentinel connections behind it close with the group.
        """
        if self._discovery is None:
            self._discovery = self.sentinel_client()
        client: redis.Redis = self._discovery.master_for(  # type: ignore[no-untyped-call]
            self.service_name, **kwargs
        )
        return client

    def master_address(self) -> tuple[str, int]:
        """The master's address as the first answering sentinel reports it."""
        last_error: Exception | None = None
        for sentinel in self.sentinels:
            if not sentinel.running or sentinel.paused:
                continue
            try:
                with sentinel.client(decode_responses=True, socket_timeout=2) as client:
                    reply = client.execute_command(
                        "SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.service_name
                    )
                if reply:
                    return (str(reply[0]), int(reply[1]))
            except redis.RedisError as exc:
                last_error = exc
        raise ServerStartError(
            f"no sentinel reported a master for {self.service_name!r}: "
            f"{last_error or 'none is running'}"
        )

    def current_master(self) -> ServerProcess:
        """The process the sentinels name as master now."""
        _host, port = self.master_address()
        for node in (self.master, self.replica):
            if node.running and node.port == port:
                return node
        raise ServerStartError(f"the sentinels name port {port} as master, not in this group")

    def wait_for_failover(self, timeout: float = 15.0) -> tuple[str, int]:
        """Wait until the sentinels promote a new master and it accepts writes as one.

        Returns the new master's address. Call it after killing or pausing the master.
        """
        previous = self._leader
        # redis-py's own discovery is the bar: it rejects a master still flagged down,
        # which GET-MASTER-ADDR-BY-NAME would already name mid-failover.
        discovery = self.sentinel_client(socket_timeout=1.0)
        try:
            return self._await_new_master(discovery, previous, timeout)
        finally:
            _close_sentinel(discovery)

    def _await_new_master(
        self,
        discovery: redis.sentinel.Sentinel,
        previous: tuple[str, int] | None,
        timeout: float,
    ) -> tuple[str, int]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                host, port = discovery.discover_master(  # type: ignore[no-untyped-call]
                    self.service_name
                )
                address = (str(host), int(port))
                if address != previous and _is_master(address):
                    self._leader = address
                    return address
            except redis.RedisError:
                pass  # sentinels mid-election or the candidate mid-promotion
            time.sleep(_POLL)
        raise ServerStartError(
            f"no failover of {self.service_name!r} away from {previous} within {timeout:g}s; "
            f"sentinel logs: {[s.log_path for s in self.sentinels if s.running]}"
        )

    # -- readiness -----------------------------------------------------------------------

    def _replica_linked(self) -> bool:
        with self.replica.client(decode_responses=True, socket_timeout=2) as client:
            status = client.info("replication").get("master_link_status")
        return str(status) == "up"

    def _sentinels_ready(self) -> bool:
        for sentinel in self.sentinels:
            with sentinel.client(decode_responses=True, socket_timeout=2) as client:
                master = client.sentinel_master(self.service_name, return_responses=True)
                replicas = client.sentinel_slaves(self.service_name)
            if not isinstance(master, dict) or not master.get("is_master"):
                return False
            if master.get("is_sdown") or master.get("is_odown"):
                return False
            if int(master.get("num-other-sentinels", 0)) != self.sentinel_count - 1:
                return False
            healthy = [
                entry
                for entry in replicas
                if entry.get("is_slave")
                and not (entry.get("is_sdown") or entry.get("is_disconnected"))
                and entry.get("master-link-status") == "ok"
            ]
            if len(healthy) != 1:
                return False
        return True

    def _wait(self, condition: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + self.start_timeout
        while True:
            try:
                if condition():
                    return
            except redis.RedisError:
                pass  # a sentinel that has not yet connected answers errors; ask again
            if time.monotonic() > deadline:
                # The directories go when the group is stopped, so quote the logs here.
                nodes = (self.master, self.replica, *self.sentinels)
                logs = "\n".join(f"{node!r}:\n{node.log_tail(6)}" for node in nodes)
                raise ServerStartError(
                    f"the sentinel group did not {what} within {self.start_timeout:g}s; "
                    f"end of each log:\n{logs}"
                )
            time.sleep(_POLL)


def _is_master(address: tuple[str, int]) -> bool:
    host, port = address
    with redis.Redis(host=host, port=port, socket_timeout=1, decode_responses=True) as client:
        role = client.execute_command("ROLE")
    return str(role[0]) == "master"


def _close_sentinel(sentinel: redis.sentinel.Sentinel) -> None:
    for connection in sentinel.sentinels:
        connection.close()
