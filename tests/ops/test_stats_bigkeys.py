"""`seawall stats` and `seawall bigkeys` on a real server and on a real Cluster."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from seawall.ops._connect import connect
from seawall.ops._scan import Scan
from seawall.ops.bigkeys import measure
from tests.ops._run import one_line_error, seawall


def _seed_sizes(r: Any) -> None:
    """Known big keys among small ones (the first three are the biggest, in this order)."""
    r.hset("big:hash", mapping={f"f{i}": "v" * 20 for i in range(6000)})
    r.set("big:string", "x" * 60_000)
    r.rpush("big:list", *[f"item-{i}" for i in range(3000)])
    pipe = r.pipeline(transaction=False)
    for i in range(400):
        pipe.set(f"small:{i}", "v")
        pipe.sadd(f"set:{i}", 1, 2)
    pipe.execute()


def test_stats_hit_rate_and_table(
    seawall_redis: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"redis://127.0.0.1:{seawall_redis.connection_pool.connection_kwargs['port']}/0"
    seawall_redis.config_resetstat()
    seawall_redis.set("k", 1)
    for _ in range(3):
        seawall_redis.get("k")
    seawall_redis.get("missing")
    run = seawall(capsys, "stats", url, "--json")
    assert run.code == 0, run.err
    figures = run.json()
    assert figures["hit_rate"] == 0.75
    assert figures["keys"] == 1 and figures["used_memory"] > 0
    assert figures["top_commands_by_calls"][0]["command"] == "get"
    table = seawall(capsys, "stats", url)
    assert table.code == 0 and "hit rate" in table.out and "75.0 %" in table.out


def test_stats_on_a_cluster_sums_the_masters_and_reads_replicas(
    seawall_cluster: Any, seawall_cluster_client: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    for i in range(30):
        seawall_cluster_client.set(f"k{i}", i)
    run = seawall(capsys, "stats", seawall_cluster.url, "--json")
    assert run.code == 0, run.err
    figures = run.json()
    assert figures["keys"] == 30 and len(figures["nodes"]) == 3
    assert {n["role"] for n in figures["nodes"]} == {"master"}
    assert len(figures["replication"]) == 3  # one replica per master, with its lag
    replicas = seawall(capsys, "stats", seawall_cluster.url, "--json", "--replica").json()
    assert {n["role"] for n in replicas["nodes"]} == {"replica"}


def test_bigkeys_finds_the_biggest_with_types_lengths_and_totals(
    seawall_redis: redis.Redis, seawall_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _seed_sizes(seawall_redis)
    run = seawall(capsys, "bigkeys", seawall_url, "--top", "3", "--json")
    assert run.code == 0, run.err
    found = run.json()
    assert [(e["key"], e["type"], e["length"]) for e in found] == [
        ("big:hash", "hash", 6000),  # about 300 KB
        ("big:string", "string", 60_000),
        ("big:list", "list", 3000),  # about 30 KB
    ]
    assert found[0]["bytes"] >= found[1]["bytes"] >= found[2]["bytes"] > 10_000
    table = seawall(capsys, "bigkeys", seawall_url, "--top", "2", "--type", "hash")
    assert table.code == 0 and "big:hash" in table.out and "big:string" not in table.out
    assert "p99" in table.out and "6,000 elements" in table.out
    nothing = seawall(capsys, "bigkeys", seawall_url, "--pattern", "nope:*")
    assert "no key matches pattern 'nope:*'" in one_line_error(nothing, "bigkeys")


def test_bigkeys_on_a_cluster_interrupted_and_resumed_per_node(
    seawall_cluster: Any, seawall_cluster_client: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    _seed_sizes(seawall_cluster_client)
    batches = 0

    def stop_after_two(done: int) -> None:
        nonlocal batches
        batches += 1
        if batches == 2:
            raise KeyboardInterrupt  # what Ctrl-C does in the middle of a scan

    with connect(seawall_cluster.url) as target:
        report = measure(Scan(target.nodes, cluster=True, count=50), top=3, on_batch=stop_after_two)
    assert report.interrupted and report.cursor is not None
    assert all("=" in part for part in report.cursor.split(","))
    # Resuming from the cursor scans the rest; at most the interrupted batch is seen twice.
    run = seawall(
        capsys, "bigkeys", seawall_cluster.url, "--count", "50", "--cursor", report.cursor,
        "--json", "--top", "1000",
    )  # fmt: skip
    assert run.code == 0, run.err
    rest = {e["key"] for e in run.json()}
    assert 0 <= report.scanned + len(rest) - 803 <= 100
    full = seawall(capsys, "bigkeys", seawall_cluster.url, "--top", "3", "--json").json()
    assert {e["key"] for e in full} == {"big:hash", "big:string", "big:list"}
    assert len({e["node"] for e in full}) >= 2  # found on different masters


def test_replica_reads_and_watch_refreshes_until_ctrl_c(
    seawall_server_factory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    master = seawall_server_factory()
    replica = seawall_server_factory(extra_args=["--replicaof", "127.0.0.1", str(master.port)])
    client = master.client()
    client.set("big:string", "x" * 30_000)
    assert client.wait(1, 5000) == 1  # the replica has it
    url = f"redis://127.0.0.1:{master.port}/0"
    stats = seawall(capsys, "stats", url, "--json", "--replica").json()
    assert [(n["address"], n["role"]) for n in stats["nodes"]] == [
        (f"127.0.0.1:{replica.port}", "replica")
    ]
    found = seawall(capsys, "bigkeys", url, "--replica", "--json").json()
    assert found[0]["key"] == "big:string" and found[0]["node"] == f"127.0.0.1:{replica.port}"
    src = Path(__file__).resolve().parents[2] / "src"
    # PYTHONFAULTHANDLER: should it ever hang, SIGABRT makes it print where it stands.
    env = dict(os.environ, PYTHONPATH=str(src), COLUMNS="100", PYTHONFAULTHANDLER="1")
    watching = subprocess.Popen(
        [sys.executable, "-m", "seawall", "stats", url, "--watch", "0.2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    # Ctrl-C only once the command is watching (connected to the server) and has had time
    # for a few refreshes: a fixed 1.5 s interrupted a start-up slowed by a loaded machine.
    before = client.info("clients")["connected_clients"]
    deadline = time.monotonic() + 30
    while client.info("clients")["connected_clients"] <= before:
        assert time.monotonic() < deadline, "seawall stats --watch never connected"
        time.sleep(0.05)
    time.sleep(1.0)
    watching.send_signal(signal.SIGINT)
    try:
        out, err = watching.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        watching.send_signal(signal.SIGABRT)
        out, err = watching.communicate(timeout=20)
        raise AssertionError(f"Ctrl-C did not stop `seawall stats --watch`:\n{err}") from None
    assert watching.returncode == 0, err
    assert out.count("hit rate") >= 2 and "Traceback" not in err  # refreshed, then stopped
    client.close()
