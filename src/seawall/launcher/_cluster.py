"""A real Redis Cluster on loopback: N masters with R replicas each, formed from Python.

The cluster is built with plain commands (ADDSLOTS, MEET, REPLICATE) over redis-py rather
than `redis-cli --cluster create`, so the server is the only executable needed (a
redis-server found on PATH or through SEAWALL_SERVER_BIN may come without a matching cli).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from typing import Any, Self

import redis
import redis.asyncio.cluster
import redis.cluster
from redis.crc import key_slot

from seawall.launcher._binary import ServerBinary, find_server_binary
from seawall.launcher._process import HOST, ServerProcess, ServerStartError, start_all, stop_all
from seawall.launcher._supervised import Managed

__all__ = ["SLOT_COUNT", "ClusterGroup", "slot_ranges"]

SLOT_COUNT = 16384
_POLL = 0.02


def slot_ranges(masters: int) -> list[tuple[int, int]]:
    """Split the 16384 slots into `masters` contiguous inclusive ranges."""
    bounds = [SLOT_COUNT * i // masters for i in range(masters + 1)]
    return [(bounds[i], bounds[i + 1] - 1) for i in range(masters)]


class ClusterGroup(Managed):
    """`masters` masters and `replicas_per_master` replicas each, all on 127.0.0.1.

    `nodes` keeps its order for the life of the group: the first `masters` nodes start
    as masters. After a failover, `masters` and `replicas` report the roles as they are
    now, asked from every reachable node.
    """

    def __init__(
        self,
        *,
        masters: int = 3,
        replicas_per_master: int = 1,
        binary: ServerBinary | None = None,
        extra_args: Sequence[str] = (),
        appendonly: bool = False,
        form_timeout: float = 30.0,
    ) -> None:
        if masters < 1 or replicas_per_master < 0:
            raise ValueError("a cluster needs masters >= 1 and replicas_per_master >= 0")
        binary = binary if binary is not None else find_server_binary()
        self.master_count = masters
        self.replicas_per_master = replicas_per_master
        self.form_timeout = form_timeout
        self.nodes = [
            ServerProcess(binary=binary, cluster=True, extra_args=extra_args, appendonly=appendonly)
            for _ in range(masters * (1 + replicas_per_master))
        ]

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> Self:
        """Start every node concurrently, form the cluster, wait until it serves all slots."""
        start_all(self.nodes)
        try:
            self._form()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        stop_all(self.nodes)

    def wait_healthy(self, timeout: float = 15.0) -> None:
        """Wait until every slot is served by a live node and all say cluster_state:ok.

        After a master is killed or paused this waits out the failover (the node timeout
        is 2 s, then the replica's election).
        """
        self._wait(self._serving, timeout, "serve every slot from a live node")

    def heal(self, timeout: float = 20.0) -> None:
        """Resume paused nodes, bring killed ones back, and wait for the full topology:
        every master with its replicas again (a returning master rejoins as a replica)."""
        for node in self.nodes:
            if node.paused:
                node.resume()
            elif not node.running:
                node.restart()
        self._wait(self._settled, timeout, "settle into masters with all their replicas")

    # -- topology ------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return self.nodes[0].url

    @property
    def startup_nodes(self) -> list[redis.cluster.ClusterNode]:
        return [
            redis.cluster.ClusterNode(HOST, node.port)  # type: ignore[no-untyped-call]
            for node in self.nodes
        ]

    @property
    def masters(self) -> list[ServerProcess]:
        return [node for node in self._reachable() if self._role(node) == "master"]

    @property
    def replicas(self) -> list[ServerProcess]:
        return [node for node in self._reachable() if self._role(node) == "slave"]

    def master_for_key(self, key: str | bytes) -> ServerProcess:
        """The node serving `key`'s slot now, to kill or pause it in a fault test."""
        encoded = key.encode() if isinstance(key, str) else key
        slot = key_slot(encoded)
        for start, end, master, *_ in self._cluster_slots():
            if start <= slot <= end:
                return self._node_on_port(int(master[1]))
        raise ServerStartError(f"no node serves slot {slot} of key {key!r}: is the cluster up?")

    def replicas_of(self, master: ServerProcess) -> list[ServerProcess]:
        """The nodes replicating `master` now."""
        for _start, _end, owner, *replicas in self._cluster_slots():
            if int(owner[1]) == master.port:
                return [self._node_on_port(int(replica[1])) for replica in replicas]
        return []

    # -- clients -------------------------------------------------------------------------

    def client(self, **kwargs: Any) -> redis.cluster.RedisCluster:
        """A sync RedisCluster over every node; the caller closes it."""
        return redis.cluster.RedisCluster(startup_nodes=self.startup_nodes, **kwargs)

    def async_client(self, **kwargs: Any) -> redis.asyncio.cluster.RedisCluster:
        """An asyncio RedisCluster over every node; the caller closes it."""
        # The asyncio client takes its own ClusterNode type, not the sync one.
        nodes = [redis.asyncio.cluster.ClusterNode(HOST, node.port) for node in self.nodes]
        return redis.asyncio.cluster.RedisCluster(startup_nodes=nodes, **kwargs)

    def flushall(self) -> None:
        """FLUSHALL on every current master (replicas follow)."""
        for node in self.masters:
            with _node_client(node) as client:
                client.flushall()

    # -- formation -----------------------------------------------------------------------

    def _form(self) -> None:
        count = self.master_count
        with contextlib.ExitStack() as stack:
            clients = [stack.enter_context(_node_client(node)) for node in self.nodes]
            for epoch, client in enumerate(clients, start=1):
                # Distinct epochs up front spare the nodes a round of collision resolution.
                client.execute_command("CLUSTER", "SET-CONFIG-EPOCH", epoch)
            for client, (first, last) in zip(clients[:count], slot_ranges(count), strict=True):
                client.execute_command("CLUSTER", "ADDSLOTS", *range(first, last + 1))
            # Meeting every pair directly beats waiting for gossip to spread (about 1 s).
            for index, client in enumerate(clients):
                for earlier in self.nodes[:index]:
                    client.execute_command("CLUSTER", "MEET", HOST, earlier.port)
            self._wait(self._all_acquainted, self.form_timeout, "learn about every other node")
            master_ids = [str(client.execute_command("CLUSTER", "MYID")) for client in clients]
            # Replicas go round-robin, so each master gets replicas_per_master of them.
            for index, replica_client in enumerate(clients[count:]):
                replica_client.execute_command("CLUSTER", "REPLICATE", master_ids[index % count])
        # Masters refuse cluster_state:ok for their first 2 s (CLUSTER_WRITABLE_DELAY), so
        # that is the floor of this wait whatever the node timeout.
        self._wait(self._settled, self.form_timeout, "form the cluster")

    def _all_acquainted(self) -> bool:
        expected = len(self.nodes)
        for node in self.nodes:
            flags = [_flags(line) for line in _cluster_nodes(node)]
            settled = [f for f in flags if not f & {"handshake", "noaddr"}]
            if len(settled) != expected:
                return False
        return True

    def _serving(self) -> bool:
        if not self._all_ok():
            return False
        live_ports = {node.port for node in self._reachable()}
        for node in self._reachable():
            with _node_client(node) as client:
                slots = client.execute_command("CLUSTER", "SLOTS")
            if any(int(entry[2][1]) not in live_ports for entry in slots):
                return False
        return True

    def _settled(self) -> bool:
        if len(self._reachable()) != len(self.nodes) or not self._all_ok():
            return False
        for node in self.nodes:
            with _node_client(node) as client:
                role = client.execute_command("ROLE")
            # A replica's ROLE: ["slave", host, port, "connected", offset].
            if role[0] == "slave" and role[3] != "connected":
                return False
        # Every node must list every replica, whichever node a client asks first.
        # (CLUSTER SLOTS leaves out a replica until gossip shows it has synced.)
        entry_size = 3 + self.replicas_per_master
        for node in self.nodes:
            with _node_client(node) as client:
                slots = client.execute_command("CLUSTER", "SLOTS")
            if len(slots) != self.master_count or any(len(e) != entry_size for e in slots):
                return False
        return True

    def _all_ok(self) -> bool:
        for node in self._reachable():
            with _node_client(node) as client:
                info = str(client.execute_command("CLUSTER", "INFO"))
            if "cluster_state:ok" not in info:
                return False
        return True

    def _wait(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if condition():
                    return
            except redis.RedisError:
                pass  # a node mid-change (e.g. loading) answers errors; ask again
            if time.monotonic() > deadline:
                # The directories go when the group is stopped, so quote the logs here.
                logs = "\n".join(f"{node!r}:\n{node.log_tail(6)}" for node in self.nodes)
                raise ServerStartError(
                    f"the cluster's nodes did not {what} within {timeout:g}s; "
                    f"end of each node's log:\n{logs}"
                )
            time.sleep(_POLL)

    # -- queries -------------------------------------------------------------------------

    def _reachable(self) -> list[ServerProcess]:
        return [node for node in self.nodes if node.running and not node.paused]

    def _role(self, node: ServerProcess) -> str:
        with _node_client(node) as client:
            return str(client.execute_command("ROLE")[0])

    def _cluster_slots(self) -> list[list[Any]]:
        last_error: Exception | None = None
        for node in self._reachable():
            try:
                with _node_client(node) as client:
                    slots: list[list[Any]] = client.execute_command("CLUSTER", "SLOTS")
                    return slots
            except redis.RedisError as exc:
                last_error = exc
        raise ServerStartError(f"no cluster node answered CLUSTER SLOTS: {last_error}")

    def _node_on_port(self, port: int) -> ServerProcess:
        for node in self.nodes:
            if node.running and node.port == port:
                return node
        raise ServerStartError(f"port {port} belongs to no node of this cluster")


def _node_client(node: ServerProcess) -> redis.Redis:
    # Short timeouts: a node that hangs during formation must fail fast, not stall tests.
    return node.client(decode_responses=True, socket_timeout=5, socket_connect_timeout=2)


def _cluster_nodes(node: ServerProcess) -> list[str]:
    with _node_client(node) as client:
        text = str(client.execute_command("CLUSTER", "NODES"))
    return [line for line in text.splitlines() if line.strip()]


def _flags(line: str) -> set[str]:
    # CLUSTER NODES: "<id> <ip:port@bus> <flags,comma,separated> <master> ..."
    return set(line.split()[2].split(","))
