"""Operations commands: `seawall bigkeys` against redis-cli's --memkeys and --bigkeys, and
`seawall delete --pattern` on a big keyspace while a client keeps sending PING.

bigkeys: 500,000 keys of four types (strings, hashes, lists, sets, sizes spread) plus 20
planted keys of known, distinct sizes that must come out as the top 20. Each contender
runs as a separate process on the same private server, in turns (order reversed every
pass); a time is the median over passes and includes process start-up for all of them, as
does the client CPU (user + system seconds of the contender's process).
redis-cli is /usr/bin/redis-cli (or REDIS_CLI); its --memkeys reports the biggest key per
type, which is checked against the planted biggest.

delete: 300,000 matching keys (and 10,000 that must survive) deleted by `seawall delete
--pattern 'del:*' --yes`; a thread sends PING in a loop throughout, and the worst and 99th
percentile round trip are reported with keys deleted per second.

    PYTHONPATH=src .venv/bin/python bench/ops.py [--quick] [--passes 3] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import redis
from _harness import (
    Column,
    Goal,
    Table,
    format_goals,
    format_table,
    machine_note,
    median,
    parse_args,
    percentile,
    server_note,
    write_json,
)

import seawall

SRC = Path(__file__).resolve().parents[1] / "src"
PLANTED = 20
SEAWALL = "seawall bigkeys"
MEMKEYS = "redis-cli --memkeys"
BIGKEYS = "redis-cli --bigkeys"
DELETE = "seawall delete"

COLUMNS = [
    Column("seconds", "seconds", ".2f"),
    Column("cpu", "client CPU s", ".2f"),
    Column("x_memkeys", "x --memkeys", ".2f"),
    Column("x_bigkeys", "x --bigkeys", ".2f"),
    Column("top_right", "top N right", ".0f"),
    Column("keys_per_s", "keys/s", ",.0f"),
    Column("ping_max_ms", "worst PING ms", ".2f"),
    Column("ping_p99_ms", "p99 PING ms", ".2f"),
]
HEADLINE = "seconds"
FIRST = "contender"
GOALS = [
    Goal("seawall bigkeys <= 1.0 x redis-cli --memkeys", SEAWALL, "x_memkeys", "<=", 1.0),
    Goal("seawall bigkeys <= 1.0 x redis-cli --bigkeys", SEAWALL, "x_bigkeys", "<=", 1.0),
    Goal("seawall bigkeys finds the planted top 20", SEAWALL, "top_right", "==", 1.0),
    Goal("worst PING during the delete <= 10 ms", DELETE, "ping_max_ms", "<=", 10.0),
]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), env.get("PYTHONPATH")]))
    return env


def fill_bigkeys(r: redis.Redis, count: int) -> list[str]:
    pipe = r.pipeline(transaction=False)
    for i in range(count):
        kind = i % 4
        if kind == 0:
            pipe.set(f"s:{i}", "x" * (i % 300))
        elif kind == 1:
            pipe.hset(f"h:{i}", mapping={f"f{j}": j for j in range(i % 9 + 1)})
        elif kind == 2:
            pipe.rpush(f"l:{i}", *range(i % 11 + 1))
        else:
            pipe.sadd(f"z:{i}", *range(i % 7 + 1))
        if i % 5000 == 4999:
            pipe.execute()
    pipe.execute()
    planted = []
    for rank in range(PLANTED):  # 20 KB up to 115 KB strings, biggest last
        name = f"planted:{rank:02d}"
        r.set(name, "p" * (20_000 + 5_000 * rank))
        planted.append(name)
    return planted[::-1]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_seawall(url: str) -> tuple[float, float, list[str]]:
    """(wall seconds, client CPU seconds, the top keys found)."""
    cpu, started = _children_cpu(), time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "seawall", "bigkeys", url, "--top", str(PLANTED), "--json"],
        capture_output=True, text=True, env=_env(), check=True,
    )  # fmt: skip
    wall = time.perf_counter() - started
    return wall, _children_cpu() - cpu, [e["key"] for e in json.loads(done.stdout)]


def run_cli(cli: str, port: int, flag: str) -> tuple[float, float, str]:
    """(wall seconds, client CPU seconds, what it printed)."""
    cpu, started = _children_cpu(), time.perf_counter()
    done = subprocess.run(
        [cli, "-h", "127.0.0.1", "-p", str(port), flag], capture_output=True, text=True, check=True
    )
    return time.perf_counter() - started, _children_cpu() - cpu, done.stdout


def bigkeys(url: str, port: int, cli: str, planted: list[str], passes: int) -> Table:
    times: dict[str, list[float]] = {SEAWALL: [], MEMKEYS: [], BIGKEYS: []}
    cpus: dict[str, list[float]] = {SEAWALL: [], MEMKEYS: [], BIGKEYS: []}
    found: list[str] = []
    cli_output = ""
    for index in range(passes):
        order = [SEAWALL, MEMKEYS, BIGKEYS]
        for name in order if index % 2 == 0 else order[::-1]:
            if name == SEAWALL:
                seconds, cpu, found = run_seawall(url)
            else:
                flag = "--memkeys" if name == MEMKEYS else "--bigkeys"
                seconds, cpu, out = run_cli(cli, port, flag)
                cli_output = out if name == MEMKEYS else cli_output
            times[name].append(seconds)
            cpus[name].append(cpu)
        print(
            f"  pass {index + 1}/{passes}: "
            + ", ".join(f"{n} {t[-1]:.2f} s" for n, t in times.items())
        )
    cli_biggest = re.search(r"^Biggest\s+string found '\"?([^'\"]+)", cli_output, re.M)
    print(f"  redis-cli --memkeys biggest string: {cli_biggest.group(1) if cli_biggest else '?'}")
    print(f"  seawall bigkeys top 3: {found[:3]}")
    mine = median(times[SEAWALL])
    return {
        SEAWALL: {
            "seconds": mine,
            "cpu": median(cpus[SEAWALL]),
            "x_memkeys": median(
                [a / b for a, b in zip(times[SEAWALL], times[MEMKEYS], strict=True)]
            ),
            "x_bigkeys": median(
                [a / b for a, b in zip(times[SEAWALL], times[BIGKEYS], strict=True)]
            ),
            # Equal sizes can share a jemalloc size class, so the order among the planted
            # keys may tie; the set must be exactly the planted 20.
            "top_right": float(set(found) == set(planted)),
        },
        MEMKEYS: {"seconds": median(times[MEMKEYS]), "cpu": median(cpus[MEMKEYS])},
        BIGKEYS: {"seconds": median(times[BIGKEYS]), "cpu": median(cpus[BIGKEYS])},
    }


def _pinger(url: str, rtts: list[float], stop: threading.Event) -> threading.Thread:
    def ping() -> None:
        client = redis.Redis.from_url(url)
        while not stop.is_set():
            started = time.perf_counter()
            client.ping()
            rtts.append(time.perf_counter() - started)
            time.sleep(0.0005)  # a steady client, not a second flood
        client.close()

    thread = threading.Thread(target=ping)
    thread.start()
    return thread


def delete(url: str, r: redis.Redis, count: int, max_ops: int | None = None) -> Table:
    pipe = r.pipeline(transaction=False)
    for i in range(count):
        pipe.set(f"del:{i}", i)
        if i % 10_000 == 9_999:
            pipe.execute()
    for i in range(10_000):
        pipe.set(f"keep:{i}", i)
    pipe.execute()
    # The same PING loop with nothing else running: what the machine itself adds.
    idle: list[float] = []
    stop = threading.Event()
    thread = _pinger(url, idle, stop)
    time.sleep(2.0)
    stop.set()
    thread.join()
    rtts: list[float] = []
    stop = threading.Event()
    thread = _pinger(url, rtts, stop)
    started = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "seawall", "delete", url, "--pattern", "del:*", "--yes",
             "--json", *(["--max-ops", str(max_ops)] if max_ops else [])],
            capture_output=True, text=True, env=_env(), check=True,
        )  # fmt: skip
    finally:
        elapsed = time.perf_counter() - started
        stop.set()
        thread.join()
    deleted = json.loads(done.stdout)["deleted"]
    assert deleted == count and r.dbsize() == 10_000, (deleted, r.dbsize())
    print(f"  deleted {deleted:,} keys in {elapsed:.2f} s; {len(rtts):,} PINGs meanwhile")
    name = DELETE if max_ops is None else f"{DELETE} --max-ops {max_ops:,}"
    table: Table = (
        {}
        if max_ops
        else {
            "PING, idle server": {
                "ping_max_ms": max(idle) * 1000,
                "ping_p99_ms": percentile(idle, 99) * 1000,
            }
        }
    )
    table[name] = {
        "seconds": elapsed,
        "keys_per_s": deleted / elapsed,
        "ping_max_ms": max(rtts) * 1000,
        "ping_p99_ms": percentile(rtts, 99) * 1000,
    }
    return table


def main() -> None:
    def extra(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--passes", type=int, default=3)

    args = parse_args(__doc__.splitlines()[0], extra)
    cli = os.environ.get("REDIS_CLI") or shutil.which("redis-cli") or "/usr/bin/redis-cli"
    keys, doomed = (20_000, 30_000) if args.quick else (500_000, 300_000)
    print(machine_note())
    with seawall.server() as url:
        r = redis.Redis.from_url(url)
        print(server_note(r) + f"; {cli}: " + subprocess.run(
            [cli, "--version"], capture_output=True, text=True, check=True
        ).stdout.strip())  # fmt: skip
        planted = fill_bigkeys(r, keys)
        print(f"bigkeys on {r.dbsize():,} keys, {args.passes} passes:")
        table = bigkeys(url, r.connection_pool.connection_kwargs["port"], cli, planted, args.passes)
        r.flushall()
        print(f"delete --pattern of {doomed:,} keys:")
        table.update(delete(url, r, doomed))
        r.flushall()
        print(f"delete --pattern of {doomed:,} keys at --max-ops 50,000:")
        table.update(delete(url, r, doomed, max_ops=50_000))
    print()
    print(format_table(COLUMNS, table, first=FIRST))
    print("\nGoals:\n" + format_goals(GOALS, table))
    write_json(args.json, "ops", table, {"keys": keys, "deleted": doomed, "passes": args.passes})


if __name__ == "__main__":
    main()
