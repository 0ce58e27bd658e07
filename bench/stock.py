"""Flash-sale throughput: take attempts per second from 8 processes selling one product.

Five ways to take one unit, side by side in one run:
- seawall.Stock.take: one script that checks, decrements, records the order id (so a
  retried order never takes twice) and logs the take to a stream;
- a bare Lua decrement: one script that checks and decrements, nothing else (no
  idempotency, no log): the floor for any correct one-round-trip take;
- Stock's own take script sent by a bare EVALSHA (no argument checks, no reply mapping):
  the floor for a take that records the order and logs it, so the gap between it and
  Stock.take is seawall's Python, and the gap between it and the bare decrement is the
  server's work for idempotency and the log;
- WATCH/MULTI: read, check, decrement in a transaction, retried on conflict (redis-py
  pipeline, as its documentation shows);
- redis-py Lock around read-check-decrement (its default 0.1 s polling wait).

Two regimes: "selling" (the stock never runs out: every attempt takes, the worst case for
Stock.take, which then logs every attempt) and "sell-out" (5 % as many units as attempts,
as in a flash sale where most attempts find nothing left). Each round every process makes
the same number of attempts from a common start; the contenders take turns in rounds
(A, B, C, D, E, then E, D, C, B, A, ...), so a noisy neighbour slows all of them alike. A
figure is the median of its contender's rounds; a ratio is the median over the turns of
the two contenders' rounds in that turn. Every round also checks nothing was oversold.

    PYTHONPATH=src .venv/bin/python bench/stock.py [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import multiprocessing
import time
from collections.abc import Callable
from multiprocessing.connection import Connection

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
    server_note,
    unique_name,
    write_json,
)

import seawall
from seawall.shared import _scripts
from seawall.stock._stock import MAX_UNITS

START_DELAY = 0.3  # seconds between "round sent" and its common start

STOCK = "seawall Stock.take"
BARE = "bare Lua decrement"
SCRIPT = "take script, bare EVALSHA"
WATCH = "WATCH/MULTI"
LOCK = "redis-py Lock"
CONTENDERS = [STOCK, BARE, SCRIPT, WATCH, LOCK]
REGIMES = {"selling": None, "sell-out": 0.05}  # units per attempt (None: never runs out)

COLUMNS = [
    Column("per_s", "attempts/s", ",.0f"),
    Column("taken", "taken/round", ",.0f"),
    Column("oversold", "oversold", ".0f"),
    Column("cpu_us", "client CPU us/attempt", ".0f"),
    Column("vs_bare", "vs bare script", ".2f"),
    Column("vs_script", "vs its script bare", ".2f"),
    Column("vs_watch", "vs WATCH/MULTI", ".2f"),
]
HEADLINE = "per_s"
FIRST = "contender [regime]"

GOALS = [
    Goal(f"{STOCK} >= 0.95 x bare script, {regime}", f"{STOCK} [{regime}]", "vs_bare", ">=", 0.95)
    for regime in REGIMES
] + [
    Goal(f"{STOCK} >= 2 x WATCH/MULTI, {regime}", f"{STOCK} [{regime}]", "vs_watch", ">=", 2.0)
    for regime in REGIMES
]

# What a user writes without seawall: check and decrement in one script.
BARE_SCRIPT = """
local left = tonumber(redis.call('get', KEYS[1]) or '0')
if left < tonumber(ARGV[1]) then
  return 0
end
redis.call('decrby', KEYS[1], ARGV[1])
return 1
"""

Attempt = Callable[[int], bool]


def _attempts(client: redis.Redis, contender: str, name: str) -> Attempt:
    """One take of one unit for order number i, the way `contender` does it."""
    stock = seawall.Stock(client, name)
    key = stock.keys.avail  # the others count in the same key Stock's put() fills
    prefix = f"{name}:{multiprocessing.current_process().pid}:"
    if contender == STOCK:
        return lambda i: stock.take(prefix + str(i))
    if contender == BARE:
        # EVALSHA straight from the client, as seawall's run_script sends it: the same
        # client-side path, so the figures differ only by what the scripts do.
        sha = client.script_load(BARE_SCRIPT)
        return lambda i: bool(client.evalsha(sha, 1, key, 1))
    if contender == SCRIPT:
        take = _scripts.load("seawall.stock", "stock_take")
        keys = (key, stock.keys.taken, stock.keys.orders, stock.keys.log, stock.keys.onsale)
        client.script_load(take.source)
        return lambda i: client.evalsha(take.sha, 5, *keys, prefix + str(i), 1) in (1, 2)
    if contender == WATCH:

        def watched(i: int) -> bool:
            with client.pipeline() as pipe:
                while True:
                    try:
                        pipe.watch(key)
                        if int(pipe.get(key) or 0) < 1:
                            pipe.unwatch()
                            return False
                        pipe.multi()
                        pipe.decrby(key, 1)
                        pipe.execute()
                        return True
                    except redis.WatchError:
                        continue

        return watched
    lock = client.lock(f"{name}:lock", timeout=10.0)

    def locked(i: int) -> bool:
        with lock:
            if int(client.get(key) or 0) < 1:
                return False
            client.decrby(key, 1)
            return True

    return locked


def worker_main(url: str, conn: Connection) -> None:
    """Child process: runs rounds on command; ("stop",) ends it."""
    client = redis.Redis.from_url(url)
    client.ping()
    conn.send("ready")
    while True:
        command = conn.recv()
        if command[0] == "stop":
            client.close()
            return
        _, contender, name, count, start_ns = command
        attempt = _attempts(client, contender, name)
        time.sleep(max(start_ns - time.monotonic_ns(), 0) / 1e9)
        cpu = time.process_time()
        taken = sum(attempt(i) for i in range(count))
        cpu = time.process_time() - cpu
        conn.send((taken, time.monotonic_ns(), cpu))


def run_round(
    admin: redis.Redis, pipes: list[Connection], contender: str, units: int, count: int
) -> dict[str, float]:
    name = unique_name("stock")
    seawall.Stock(admin, name).put(units)
    start_ns = time.monotonic_ns() + int(START_DELAY * 1e9)
    for pipe in pipes:
        pipe.send(("round", contender, name, count, start_ns))
    results = [pipe.recv() for pipe in pipes]
    elapsed = (max(finished for _, finished, _ in results) - start_ns) / 1e9
    taken = sum(t for t, _, _ in results)
    left = int(admin.get(seawall.Stock(admin, name).keys.avail) or 0)
    for key in admin.scan_iter(match=f"*{name}*", count=1000):
        admin.delete(key)
    attempts = count * len(pipes)
    return {
        "per_s": attempts / elapsed,
        "taken": taken,
        # More taken than there was, or the counter below zero: an unsafe take.
        "oversold": max(taken - units, 0, -left),
        "cpu_us": 1e6 * sum(c for _, _, c in results) / attempts,
    }


def main() -> None:
    args = parse_args(__doc__.splitlines()[0], _arguments)
    count = 150 if args.quick else args.attempts
    rounds = 2 if args.quick else args.rounds
    ctx = multiprocessing.get_context("spawn")
    table: Table = {}
    with seawall.server() as url:
        admin = redis.Redis.from_url(url)
        print(f"stock: {machine_note()}; {server_note(admin)}")
        print(
            f"{args.workers} processes x {count} attempts per round, {rounds} rounds per "
            "contender and regime\n"
        )
        pipes: list[Connection] = []
        processes = []
        try:
            for _ in range(args.workers):
                parent, child = ctx.Pipe()
                process = ctx.Process(target=worker_main, args=(url, child))
                process.start()
                child.close()
                pipes.append(parent)
                processes.append(process)
            for pipe in pipes:
                if pipe.recv() != "ready":
                    raise RuntimeError("a worker did not start")
            for regime, ratio in REGIMES.items():
                attempts = count * args.workers
                units = MAX_UNITS if ratio is None else int(attempts * ratio)
                rows: dict[str, list[dict[str, float]]] = {c: [] for c in CONTENDERS}
                for turn in range(rounds):
                    order = CONTENDERS if turn % 2 == 0 else CONTENDERS[::-1]
                    for contender in order:
                        rows[contender].append(run_round(admin, pipes, contender, units, count))
                for contender in CONTENDERS:
                    runs = rows[contender]
                    table[f"{contender} [{regime}]"] = {
                        "per_s": median([r["per_s"] for r in runs]),
                        "taken": median([r["taken"] for r in runs]),
                        "oversold": max(r["oversold"] for r in runs),
                        "cpu_us": median([r["cpu_us"] for r in runs]),
                    }
                    print(
                        f"  {regime}: {contender}: "
                        + ", ".join(f"{r['per_s']:,.0f}" for r in runs)
                        + " attempts/s"
                    )
                # Each ratio pairs rounds of the same turn, which ran back to back: the
                # load of the moment cancels out, as it would not between medians.
                for mine, metric, other in (
                    (STOCK, "vs_bare", BARE),
                    (STOCK, "vs_script", SCRIPT),
                    (STOCK, "vs_watch", WATCH),
                    (SCRIPT, "vs_bare", BARE),
                ):
                    table[f"{mine} [{regime}]"][metric] = median(
                        [
                            ours["per_s"] / theirs["per_s"]
                            for ours, theirs in zip(rows[mine], rows[other], strict=True)
                        ]
                    )
        finally:
            for pipe in pipes:
                pipe.send(("stop",))
            for process in processes:
                process.join(10)
                if process.is_alive():
                    process.kill()
            admin.close()
    print()
    print(format_table(COLUMNS, table, first=FIRST))
    print("\nGoals:\n" + format_goals(GOALS, table))
    write_json(
        args.json, "stock", table, {"workers": args.workers, "attempts": count, "rounds": rounds}
    )


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workers", type=int, default=8, help="selling processes")
    parser.add_argument("--attempts", type=int, default=600, help="per process and round")
    parser.add_argument("--rounds", type=int, default=4, help="per contender and regime")


if __name__ == "__main__":
    main()
