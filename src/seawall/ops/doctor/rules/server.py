"""Server rules: persistence, replication, client buffers, Cluster slot balance."""

from __future__ import annotations

from collections.abc import Iterator

from seawall.ops._info import number
from seawall.ops.doctor._model import ALIBABA, Yielded, rule
from seawall.ops.doctor._snapshot import Snapshot

_CLIENT_BUFFER = 64 * 1024 * 1024  # a client holding this much output is a problem


@rule("SD030", "persistence", "Redis persistence: RDB and/or AOF, and watch their status")
def persistence(snapshot: Snapshot) -> Iterator[Yielded]:
    """A failed background save or AOF write means the data on disk is old: a restart loses
    what came after, and with `stop-writes-on-bgsave-error` the server refuses writes. With
    neither RDB nor AOF, a restart starts empty (fine for a pure cache, said as info).

    Fix: read the server log for the failure (disk full, fork refused for lack of memory:
    `vm.overcommit_memory = 1`); enable AOF (`appendonly yes`) or RDB `save` for data.
    """
    for node in snapshot.nodes:
        info = node.info
        if info.get("rdb_last_bgsave_status") == "err":
            yield (
                "error",
                f"the last RDB save failed on {node.address}",
                ("check the server log; free disk; set vm.overcommit_memory = 1"),
                node.address,
            )
        if (
            info.get("aof_last_write_status") == "err"
            or info.get("aof_last_bgrewrite_status") == "err"
        ):
            yield (
                "error",
                f"AOF writes fail on {node.address}",
                ("check the server log and the disk"),
                node.address,
            )
        save = (node.config or {}).get("save", None)
        if node.config is not None and not save and number(info, "aof_enabled") == 0:
            yield (
                "info",
                f"no persistence on {node.address} (no RDB save points, no AOF)",
                ("fine for a cache; for data: CONFIG SET appendonly yes"),
                node.address,
            )


@rule("SD031", "replication", "Redis replication: read-only replicas, live links")
def replication(snapshot: Snapshot) -> Iterator[Yielded]:
    """A replica whose link is down serves ever older data; a writable replica drifts from
    its master silently. A master without replicas loses everything since the last save
    when its machine dies.

    Fix: check the network and `masterauth`; `CONFIG SET replica-read-only yes`; add a
    replica (`REPLICAOF host port`) or accept the risk for a cache.
    """
    for node in snapshot.nodes:
        info = node.info
        if info.get("role") == "slave" and info.get("master_link_status") != "up":
            yield (
                "error",
                f"replica {node.address} has lost its master link",
                ("check the network and masterauth"),
                node.address,
            )
        if (node.config or {}).get("replica-read-only") == "no":
            yield (
                "warning",
                f"replica-read-only is no on {node.address}",
                ("CONFIG SET replica-read-only yes"),
                node.address,
            )
        if info.get("role") == "master" and number(info, "connected_slaves") == 0:
            yield (
                "info",
                f"master {node.address} has no replica",
                ("add a replica (REPLICAOF), or accept losing data with the machine"),
                node.address,
            )


@rule("SD032", "client-buffers", ALIBABA + ": bound client output buffers")
def client_buffers(snapshot: Snapshot) -> Iterator[Yielded]:
    """A client that reads slower than the server writes (a slow pub/sub subscriber, a
    MONITOR, a huge HGETALL) accumulates output in the server's memory, outside maxmemory.
    Without a limit on `normal`/`pubsub` clients that can grow until the server is killed.

    Fix: `client-output-buffer-limit pubsub 32mb 8mb 60` (the default); find the client
    named here and fix what it reads.
    """
    for node in snapshot.nodes:
        for client in node.clients:
            omem = int(client.get("omem", "0") or 0)
            if omem > _CLIENT_BUFFER:
                yield (
                    "warning",
                    (
                        f"client {client.get('addr')} ({client.get('name') or 'unnamed'}, last "
                        f"command {client.get('cmd')}) holds {omem // 1048576} MiB of output on "
                        f"{node.address}"
                    ),
                    "fix or disconnect that client (CLIENT KILL ADDR ...)",
                    node.address,
                )
        limits = (node.config or {}).get("client-output-buffer-limit", "")
        if "pubsub 0 0 0" in limits:
            yield (
                "warning",
                f"pub/sub client output buffers are unbounded on {node.address}",
                ("CONFIG SET client-output-buffer-limit 'pubsub 32mb 8mb 60'"),
                node.address,
            )
        maxclients = number(node.info, "maxclients", 0.0) or float(
            (node.config or {}).get("maxclients", "0") or 0
        )
        connected = number(node.info, "connected_clients")
        if maxclients and connected > 0.8 * maxclients:
            yield (
                "warning",
                (f"{connected:.0f} clients of maxclients {maxclients:.0f} on {node.address}"),
                "use connection pools; raise maxclients",
                node.address,
            )


@rule("SD033", "cluster-slots", "Redis Cluster: every slot served, keys spread evenly")
def cluster_slots(snapshot: Snapshot) -> Iterator[Yielded]:
    """A slot served by no live master makes every key in it fail; one master holding far
    more keys than the others (uneven slots, or hot hash tags like `{user}`) is the first
    to run out of memory and CPU.

    Fix: `redis-cli --cluster fix` / `rebalance`; spread hash tags over many values.
    """
    if not snapshot.cluster:
        return
    info = snapshot.cluster_info
    if info.get("cluster_state") != "ok" or number(info, "cluster_slots_ok") < 16384:
        yield (
            "error",
            (
                f"the Cluster is {info.get('cluster_state')}: "
                f"{number(info, 'cluster_slots_ok'):.0f} of 16384 slots served"
            ),
            "redis-cli --cluster fix HOST:PORT",
            None,
        )
    sizes = {n.address: n.dbsize for n in snapshot.nodes}
    if len(sizes) > 1 and sum(sizes.values()) >= 1000:
        mean = sum(sizes.values()) / len(sizes)
        for address, size in sizes.items():
            if size > 2 * mean:
                yield (
                    "warning",
                    (f"master {address} holds {size:,} keys, over twice the mean of {mean:,.0f}"),
                    "rebalance slots; look for one hash tag shared by many keys",
                    address,
                )
    slots = [r["slots"] for r in snapshot.cluster_nodes if "master" in r["flags"] and r["slots"]]
    if slots and max(slots) > 2 * min(slots):
        yield (
            "warning",
            (f"slots are uneven across masters ({min(slots)} to {max(slots)} per master)"),
            "redis-cli --cluster rebalance HOST:PORT",
            None,
        )
