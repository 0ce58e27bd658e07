"""Connecting an operations command to a server: one URL in, the nodes to work on out.

A URL names one server. When that server says `cluster_enabled:1` (INFO cluster), every
master of the cluster is worked on, reached with the same user, password and TLS settings
as the URL; `replica=True` reads from a replica of each master instead (a master with no
live replica is read itself, and `Node.fallback` says so). Connection errors become one
`OpsError` line that names the address and what to do: the CLI prints it without a
traceback.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlsplit

import redis

from seawall.errors import SeawallError
from seawall.ops._info import parse_info

__all__ = [
    "Node",
    "OpsError",
    "Target",
    "command",
    "connect",
    "guard",
    "info_text",
    "parse_cluster_nodes",
    "redact",
]

_SCHEMES = ("redis", "rediss")
_CONNECT_TIMEOUT = 5.0
# A long MEMORY USAGE pipeline on a loaded server answers within this; past it the
# server is too busy for an operations scan anyway.
_SOCKET_TIMEOUT = 30.0

_T = TypeVar("_T")


class OpsError(SeawallError):
    """An operations command cannot go on: unreachable server, refused login, bad input."""


@dataclass
class Node:
    """One server to work on: its address, a client for it, and its role."""

    address: str
    client: redis.Redis
    role: str = "master"
    master: str | None = None  # for a replica: the address of its master
    fallback: bool = False  # replica wanted, none live: this is the master itself


@dataclass
class Target:
    url: str
    cluster: bool
    nodes: list[Node] = field(default_factory=list)  # what the command works on
    masters: list[Node] = field(default_factory=list)  # every master (cluster or not)

    def close(self) -> None:
        for node in {id(n): n for n in self.nodes + self.masters}.values():
            node.client.close()

    def __enter__(self) -> Target:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def redact(url: str) -> str:
    """The URL without its password, for messages."""
    parts = urlsplit(url)
    host = parts.hostname or "localhost"
    port = parts.port or 6379
    return f"{parts.scheme}://{host}:{port}"


def guard(call: Callable[..., _T], where: str, *args: Any, **kwargs: Any) -> _T:
    """`call(*args, **kwargs)`, with redis-py's connection and login errors turned into
    one OpsError line that names `where`."""
    try:
        return call(*args, **kwargs)
    except redis.AuthenticationError as exc:
        raise OpsError(
            f"{where} refused the login ({exc}): check the user and password in the URL "
            "(redis://USER:PASSWORD@HOST:PORT)"
        ) from None
    except redis.TimeoutError:
        raise OpsError(
            f"{where} did not answer within {_SOCKET_TIMEOUT:g} s: the server is busy or "
            "paused; try again, or lower --max-ops"
        ) from None
    except redis.ConnectionError as exc:
        raise OpsError(f"cannot reach {where}: {exc}") from None
    except redis.ResponseError as exc:
        text = str(exc)
        if text.startswith(("NOAUTH", "WRONGPASS", "NOPERM")):
            raise OpsError(
                f"{where} refused the command ({text}): give a user and password with the "
                "rights it needs in the URL (redis://USER:PASSWORD@HOST:PORT)"
            ) from None
        raise OpsError(f"{where} answered an error: {text}") from None


def command(client: redis.Redis, *args: Any) -> Any:
    """`client.execute_command(*args)`: the reply, typed as what it is (anything)."""
    return client.execute_command(*args)  # type: ignore[no-untyped-call]


def info_text(client: redis.Redis, section: str) -> Any:
    """INFO `section` as the server sent it (see `_raw_info`)."""
    return client.execute_command("INFO", section)  # type: ignore[no-untyped-call]


def _client(base: redis.Redis, host: str | None = None, port: int | None = None) -> redis.Redis:
    kwargs: dict[str, Any] = dict(base.connection_pool.connection_kwargs)
    if host is not None:
        kwargs["host"], kwargs["port"] = host, port
    pool = redis.ConnectionPool(connection_class=base.connection_pool.connection_class, **kwargs)
    client = redis.Redis(connection_pool=pool)
    _raw_info(client)
    return client


def _raw_info(client: redis.Redis) -> None:
    # INFO comes back as text so that `seawall.ops._info` parses it, the same way for
    # every server version, in plain code that tests without a server.
    client.set_response_callback("INFO", lambda response, **_: response)


def parse_cluster_nodes(text: str) -> list[dict[str, Any]]:
    """CLUSTER NODES as records: id, host, port, flags, master id, slot count."""
    nodes = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 8:
            continue
        address = fields[1].split("@", 1)[0].split(",", 1)[0]
        host, _, port = address.rpartition(":")
        flags = set(fields[2].split(","))
        slots = 0
        for part in fields[8:]:
            if part.startswith("["):
                continue  # a slot being migrated or imported
            low, _, high = part.partition("-")
            slots += int(high or low) - int(low) + 1
        nodes.append(
            {
                "id": fields[0],
                "host": host,
                "port": int(port) if port.isdigit() else 0,
                "flags": flags,
                "master": None if fields[3] == "-" else fields[3],
                "link": fields[7],
                "slots": slots,
            }
        )
    return nodes


def connect(url: str, *, replica: bool = False) -> Target:
    """Connect to the server at `url` (and, on a Cluster, to every master)."""
    if not isinstance(url, str) or urlsplit(url).scheme not in _SCHEMES:
        raise OpsError(
            f"{url!r} is not a server URL: give redis://[USER:PASSWORD@]HOST:PORT[/DB] "
            "or rediss://... for TLS"
        )
    where = redact(url)
    try:
        seed = redis.Redis.from_url(
            url, socket_connect_timeout=_CONNECT_TIMEOUT, socket_timeout=_SOCKET_TIMEOUT
        )
    except ValueError as exc:
        raise OpsError(f"{where}: bad URL ({exc})") from None
    _raw_info(seed)
    _probe(url, where)
    info = parse_info(guard(info_text, where, seed, "cluster"))
    cluster = int(info.get("cluster_enabled", 0)) == 1
    if not cluster:
        node = Node(where.split("://", 1)[1], seed)
        target = Target(url, cluster=False, nodes=[node], masters=[node])
        if replica:
            target.nodes = [_replica_of_single(seed, node)]
        return target
    text = guard(command, where, seed, "CLUSTER", "NODES")
    records = parse_cluster_nodes(text.decode() if isinstance(text, bytes) else str(text))
    seed.close()
    live = [r for r in records if not r["flags"] & {"fail", "noaddr", "handshake"}]
    masters: list[Node] = []
    by_id: dict[str, Node] = {}
    with _closing_on_error(masters):
        for record in sorted((r for r in live if "master" in r["flags"]), key=_order):
            if record["slots"] == 0:
                continue  # a master without slots holds no keys
            address = f"{record['host']}:{record['port']}"
            node = Node(address, _client(seed, record["host"], record["port"]))
            masters.append(node)
            by_id[record["id"]] = node
        target = Target(url, cluster=True, nodes=list(masters), masters=masters)
        if replica:
            target.nodes = [_replica_in_cluster(seed, m, live, by_id) for m in masters]
    return target


def _probe(url: str, where: str) -> None:
    """First contact under the connect timeout, so that a wrong endpoint (not a Redis
    server, or TLS on one side only) fails within seconds, with its likely cause, instead
    of waiting the long timeout of a busy server or showing a protocol traceback."""
    tls = url.startswith("rediss:")
    other = "redis:// for a plain server" if tls else "rediss:// for a TLS port"
    probe = redis.Redis.from_url(
        url, socket_connect_timeout=_CONNECT_TIMEOUT, socket_timeout=_CONNECT_TIMEOUT
    )
    try:
        probe.ping()
    except (redis.AuthenticationError, redis.ResponseError):
        pass  # a Redis server that wants a login: the guarded call says so
    except redis.TimeoutError:
        raise OpsError(
            f"{where} did not answer within {_CONNECT_TIMEOUT:g} s of connecting"
            f"{' (no TLS handshake)' if tls else ''}: is it a Redis server, and does it "
            f"speak {'TLS' if tls else 'plain TCP'}? (use {other})"
        ) from None
    except redis.ConnectionError as exc:
        if "connecting to" in str(exc):
            raise OpsError(f"cannot reach {where}: {exc}") from None
        raise OpsError(
            f"{where} closed the connection ({exc}): is it a Redis server, and does it speak "
            f"{'TLS' if tls else 'plain TCP'}? (use {other})"
        ) from None
    except redis.RedisError as exc:  # InvalidResponse: another protocol answered
        raise OpsError(
            f"{where} does not speak the Redis protocol ({exc}): check the host and port"
            f"{'' if tls else ' (a TLS port needs rediss://)'}"
        ) from None
    finally:
        probe.close()


def _order(record: dict[str, Any]) -> tuple[str, int]:
    return (record["host"], record["port"])


@contextlib.contextmanager
def _closing_on_error(nodes: list[Node]) -> Iterator[None]:
    try:
        yield
    except BaseException:
        for node in nodes:
            node.client.close()
        raise


def _replica_of_single(seed: redis.Redis, master: Node) -> Node:
    info = parse_info(guard(info_text, master.address, seed, "replication"))
    if info.get("role") == "slave":
        return Node(master.address, seed, role="replica", master=None)
    for index in range(int(info.get("connected_slaves", 0))):
        entry = info.get(f"slave{index}")
        if isinstance(entry, dict) and entry.get("state") == "online":
            host, port = str(entry["ip"]), int(entry["port"])
            client = _client(seed, host, port)
            return Node(f"{host}:{port}", client, role="replica", master=master.address)
    return Node(master.address, master.client, fallback=True)


def _replica_in_cluster(
    seed: redis.Redis, master: Node, live: list[dict[str, Any]], by_id: dict[str, Node]
) -> Node:
    master_id = next(i for i, n in by_id.items() if n is master)
    for record in sorted(live, key=_order):
        if "slave" in record["flags"] and record["master"] == master_id:
            if record["link"] != "connected":
                continue
            client = _client(seed, record["host"], record["port"])
            # A replica in a cluster answers reads only after READONLY.
            guard(command, master.address, client, "READONLY")
            address = f"{record['host']}:{record['port']}"
            return Node(address, client, role="replica", master=master.address)
    return Node(master.address, master.client, fallback=True)
