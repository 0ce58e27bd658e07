"""Bulk cache calls, 100 keys each: seawall.Cache and seawall.aio.Cache against dogpile.cache,
cashews and bare redis-py.

Four operations, each with every library that has it, side by side in one run:
- get_many, warm: 100 cached keys in one call. seawall `get_many`, dogpile.cache
  `get_multi`, cashews `get_many`; floor: one MGET + json.loads of each value.
- set_many: 100 keys written in one call. seawall `set_many`, dogpile.cache `set_multi`,
  cashews `set_many`; floor: one pipeline of 100 SET EX of json.dumps.
- get_or_load_many, warm: as get_many, through the loading call. seawall
  `get_or_load_many`, dogpile.cache `get_or_create_multi` (cashews has no such call);
  floor: MGET + json.loads.
- get_or_load_many, cold: 100 keys nobody has cached, new ones every call: the loader
  gets the 100 keys in one call and returns at once, so the figure is the cache's own
  work. seawall `get_or_load_many` (one load per key across processes), dogpile.cache
  `get_or_create_multi` with its Redis lock (distributed_lock=True: the same guarantee)
  and with its default thread lock (no guarantee across processes); floor: MGET, load,
  one pipeline of SET EX.
seawall runs with its L1 off (`l1_size=0, hot_keys=0`) so that every call reaches Redis as
the others' do; the "L1 on" rows show the default, where a warm call is served from
memory. Values are a row of plain JSON types: seawall and the floor store JSON, dogpile
and cashews their default pickle (see bench/codec.py for the codecs alone).

Contenders take turns round by round (order reversed every pass); calls/s is the median
of a contender's rounds; "x floor" and "x rival" are medians of same-pass ratios to the
floor of the same world (sync or asyncio) and to dogpile.cache (sync) or cashews (aio).
Requests per call are counted at the client (redis-py's send_packed_command) over one
more call after the timing.

    PYTHONPATH=src .venv/bin/python bench/cache_bulk.py [--quick] [--json PATH]
        [--passes 15] [--seconds 0.1]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import redis
import redis.asyncio
from _harness import (
    Column,
    Goal,
    Table,
    counting_requests,
    format_goals,
    format_table,
    interleaved_rounds,
    machine_note,
    median,
    parse_args,
    server_note,
    unique_name,
    write_json,
)

import seawall
import seawall.aio

KEYS = 100
TTL = 300
VALUE = {"id": 42, "name": "a cached row", "email": "row@example.com", "score": 91.5,
         "active": True, "tags": ["x", "y"], "parent": None}  # fmt: skip

GET, SET, LOAD_WARM, LOAD_COLD = (
    "get_many, warm",
    "set_many",
    "get_or_load_many, warm",
    "get_or_load_many, cold",
)
OPERATIONS = (GET, SET, LOAD_WARM, LOAD_COLD)
FLOOR, AFLOOR = "redis-py (floor)", "redis.asyncio (floor)"
SEAWALL, ASEAWALL = "seawall.Cache (L1 off)", "seawall.aio.Cache (L1 off)"
DOGPILE, CASHEWS = "dogpile.cache", "cashews"

HEADLINE = "ops"
FIRST = "operation: contender"
COLUMNS = [
    Column("ops", "calls/s", ",.0f"),
    Column("us", "us/call", ",.0f"),
    Column("cpu_us", "client CPU us/call", ",.0f"),
    Column("ratio", "x floor", ".2f"),
    Column("vs_rival", "x rival", ".2f"),
    Column("requests", "requests/call", ".0f"),
]
GOALS = (
    [
        Goal(f"{world} get_many >= 0.9 x MGET + json.loads", f"{GET}: {world}", "ratio", ">=", 0.9)
        for world in (SEAWALL, ASEAWALL)
    ]
    + [
        Goal(f"{SEAWALL} >= dogpile.cache, {op}", f"{op}: {SEAWALL}", "vs_rival", ">=", 1.0)
        for op in OPERATIONS
    ]
    + [
        Goal(f"{ASEAWALL} >= cashews, {op}", f"{op}: {ASEAWALL}", "vs_rival", ">=", 1.0)
        for op in (GET, SET)
    ]
)


@dataclass
class Contender:
    name: str
    call: Callable[[], Any]  # one bulk call; a coroutine function for asyncio contenders
    floor: str
    rival: str | None = None


def _count(result: Any) -> int:
    """How many of a bulk call's values are VALUE (whatever shape the library returns)."""
    values = result.values() if isinstance(result, Mapping) else result
    return sum(value == VALUE for value in values)


def _load(missing: Iterable[str]) -> dict[str, Any]:
    return {key: VALUE for key in missing}


class Keys:
    """The warm keys of one contender, and a new set of 100 cold ones per call."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.warm = [f"{prefix}:w{i}" for i in range(KEYS)]
        self._calls = itertools.count()

    def cold(self) -> list[str]:
        call = next(self._calls)
        return [f"{self.prefix}:c{call}:{i}" for i in range(KEYS)]


def floors(client: redis.Redis, aclient: Any, name: str) -> Iterator[tuple[str, Contender]]:
    """What a user writes without a cache library."""
    keys = Keys(f"{name}:floor")
    client.mset({key: json.dumps(VALUE) for key in keys.warm})

    def get(names: list[str]) -> dict[str, Any]:
        return {k: json.loads(v) for k, v in zip(names, client.mget(names), strict=True) if v}

    def put(items: Mapping[str, Any]) -> None:
        pipe = client.pipeline(transaction=False)
        for key, value in items.items():
            pipe.set(key, json.dumps(value), ex=TTL)
        pipe.execute()

    def load(names: list[str]) -> dict[str, Any]:
        found = get(names)
        missing = [key for key in names if key not in found]
        if missing:
            loaded = _load(missing)
            put(loaded)
            found.update(loaded)
        return found

    async def aget(names: list[str]) -> dict[str, Any]:
        stored = await aclient.mget(names)
        return {k: json.loads(v) for k, v in zip(names, stored, strict=True) if v}

    async def aput(items: Mapping[str, Any]) -> None:
        pipe = aclient.pipeline(transaction=False)
        for key, value in items.items():
            pipe.set(key, json.dumps(value), ex=TTL)
        await pipe.execute()

    async def aload(names: list[str]) -> dict[str, Any]:
        found = await aget(names)
        missing = [key for key in names if key not in found]
        if missing:
            loaded = _load(missing)
            await aput(loaded)
            found.update(loaded)
        return found

    items = dict.fromkeys(keys.warm, VALUE)

    async def aset() -> None:
        await aput(items)

    async def aget_warm() -> Any:
        return await aget(keys.warm)

    async def aload_warm() -> Any:
        return await aload(keys.warm)

    async def aload_cold() -> Any:
        return await aload(keys.cold())

    yield GET, Contender(FLOOR, lambda: get(keys.warm), FLOOR)
    yield SET, Contender(FLOOR, lambda: put(items), FLOOR)
    yield LOAD_WARM, Contender(FLOOR, lambda: load(keys.warm), FLOOR)
    yield LOAD_COLD, Contender(FLOOR, lambda: load(keys.cold()), FLOOR)
    yield GET, Contender(AFLOOR, aget_warm, AFLOOR)
    yield SET, Contender(AFLOOR, aset, AFLOOR)
    yield LOAD_WARM, Contender(AFLOOR, aload_warm, AFLOOR)
    yield LOAD_COLD, Contender(AFLOOR, aload_cold, AFLOOR)


def seawall_sync(client: redis.Redis, name: str) -> Iterator[tuple[str, Contender]]:
    remote = seawall.Cache(client, f"{name}:sw", ttl=TTL, l1_size=0, hot_keys=0)
    local = seawall.Cache(client, f"{name}:swl1", ttl=TTL)
    keys = Keys("k")  # the namespace keeps the caches apart
    items = dict.fromkeys(keys.warm, VALUE)
    for cache in (remote, local):
        cache.set_many(items)
    yield GET, Contender(SEAWALL, lambda: remote.get_many(keys.warm), FLOOR, DOGPILE)
    yield GET, Contender("seawall.Cache (L1 on)", lambda: local.get_many(keys.warm), FLOOR)
    yield SET, Contender(SEAWALL, lambda: remote.set_many(items), FLOOR, DOGPILE)
    yield (
        LOAD_WARM,
        Contender(SEAWALL, lambda: remote.get_or_load_many(keys.warm, _load), FLOOR, DOGPILE),
    )
    yield (
        LOAD_WARM,
        Contender("seawall.Cache (L1 on)", lambda: local.get_or_load_many(keys.warm, _load), FLOOR),
    )
    yield (
        LOAD_COLD,
        Contender(SEAWALL, lambda: remote.get_or_load_many(keys.cold(), _load), FLOOR, DOGPILE),
    )


def seawall_async(aclient: Any, name: str) -> Iterator[tuple[str, Contender]]:
    remote = seawall.aio.Cache(aclient, f"{name}:asw", ttl=TTL, l1_size=0, hot_keys=0)
    local = seawall.aio.Cache(aclient, f"{name}:aswl1", ttl=TTL)
    keys = Keys("k")
    items = dict.fromkeys(keys.warm, VALUE)

    async def get() -> Any:
        return await remote.get_many(keys.warm)

    async def get_local() -> Any:
        return await local.get_many(keys.warm)

    async def put() -> Any:
        return await remote.set_many(items)

    async def load_warm() -> Any:
        return await remote.get_or_load_many(keys.warm, _load)

    async def load_warm_local() -> Any:
        return await local.get_or_load_many(keys.warm, _load)

    async def load_cold() -> Any:
        return await remote.get_or_load_many(keys.cold(), _load)

    async def fill() -> None:
        for cache in (remote, local):
            await cache.set_many(items)

    yield "fill", Contender("", fill, "")
    yield GET, Contender(ASEAWALL, get, AFLOOR, CASHEWS)
    yield GET, Contender("seawall.aio.Cache (L1 on)", get_local, AFLOOR)
    yield SET, Contender(ASEAWALL, put, AFLOOR, CASHEWS)
    yield LOAD_WARM, Contender(ASEAWALL, load_warm, AFLOOR)
    yield LOAD_WARM, Contender("seawall.aio.Cache (L1 on)", load_warm_local, AFLOOR)
    yield LOAD_COLD, Contender(ASEAWALL, load_cold, AFLOOR)


def dogpile(url: str, name: str) -> Iterator[tuple[str, Contender]]:
    from dogpile.cache import make_region

    def region(distributed: bool) -> Any:
        arguments: dict[str, Any] = {"url": url, "redis_expiration_time": TTL}
        if distributed:
            arguments.update(distributed_lock=True, thread_local_lock=False, lock_timeout=10)
        return make_region().configure(
            "dogpile.cache.redis", expiration_time=TTL, arguments=arguments
        )

    locked, plain = region(distributed=True), region(distributed=False)
    keys, plain_keys = Keys(f"{name}:dp"), Keys(f"{name}:dpt")
    items = dict.fromkeys(keys.warm, VALUE)
    locked.set_multi(items)

    def create(*missing: str) -> list[Any]:
        return [VALUE for _ in missing]

    yield GET, Contender(DOGPILE, lambda: locked.get_multi(keys.warm), FLOOR)
    yield SET, Contender(DOGPILE, lambda: locked.set_multi(items), FLOOR)
    yield (
        LOAD_WARM,
        Contender(DOGPILE, lambda: locked.get_or_create_multi(keys.warm, create), FLOOR),
    )
    yield (
        LOAD_COLD,
        Contender(
            DOGPILE + " (Redis lock)",
            lambda: locked.get_or_create_multi(keys.cold(), create),
            FLOOR,
        ),
    )
    yield (
        LOAD_COLD,
        Contender(
            DOGPILE + " (thread lock)",
            lambda: plain.get_or_create_multi(plain_keys.cold(), create),
            FLOOR,
        ),
    )


def cashews(url: str, name: str) -> Iterator[tuple[str, Contender]]:
    from cashews import Cache

    cache = Cache()
    cache.setup(url)
    keys = Keys(f"{name}:cw")
    items = dict.fromkeys(keys.warm, VALUE)

    async def get() -> Any:
        return await cache.get_many(*keys.warm)

    async def put() -> None:
        await cache.set_many(items, expire=TTL)

    yield "fill", Contender("", put, "")
    yield GET, Contender(CASHEWS, get, AFLOOR)
    yield SET, Contender(CASHEWS, put, AFLOOR)


def contenders(url: str, runner: asyncio.Runner) -> dict[str, dict[str, Contender]]:
    """operation -> contender name -> Contender, warm keys filled, the floors first."""
    name = unique_name("bulk")
    client = redis.Redis.from_url(url)
    aclient = runner.run(_async_client(url))
    sources = itertools.chain(
        floors(client, aclient, name),
        seawall_sync(client, name),
        dogpile(url, name),
        seawall_async(aclient, name),
        cashews(url, name),
    )
    table: dict[str, dict[str, Contender]] = {op: {} for op in OPERATIONS}
    for op, contender in sources:
        if op == "fill":
            runner.run(contender.call())
        else:
            table[op][contender.name] = contender
    # The rivals' own rows name their lock; pair seawall with the Redis-locked one.
    for contender in table[LOAD_COLD].values():
        if contender.rival == DOGPILE:
            contender.rival = DOGPILE + " (Redis lock)"
    return table


async def _async_client(url: str) -> Any:
    return redis.asyncio.Redis.from_url(url)


def invoke(runner: asyncio.Runner, contender: Contender) -> Any:
    if asyncio.iscoroutinefunction(contender.call):
        return runner.run(contender.call())
    return contender.call()


def timed_round(
    runner: asyncio.Runner, contender: Contender, seconds: float
) -> tuple[float, float]:
    """(calls per second, client CPU us per call) over about `seconds` of calls."""
    call = contender.call
    cpu = time.process_time()
    if asyncio.iscoroutinefunction(call):

        async def loop() -> tuple[int, float]:
            done, started = 0, time.perf_counter()
            while time.perf_counter() - started < seconds:
                await call()
                done += 1
            return done, time.perf_counter() - started

        done, took = runner.run(loop())
    else:
        done, started = 0, time.perf_counter()
        while time.perf_counter() - started < seconds:
            call()
            done += 1
        took = time.perf_counter() - started
    return done / took, (time.process_time() - cpu) * 1e6 / done


def check(runner: asyncio.Runner, op: str, contender: Contender) -> None:
    """Every call of a reading contender gives back the 100 values; stop the run if not."""
    for _ in range(3):  # also the warm-up: scripts loaded, connections open
        result = invoke(runner, contender)
        if op != SET and _count(result) != KEYS:
            shown = repr(result)[:500]
            raise SystemExit(f"{op}: {contender.name} gave {_count(result)} of {KEYS}: {shown}")


def measure(url: str, passes: int, seconds: float) -> Table:
    table: Table = {}
    with asyncio.Runner() as runner:
        for op, group in contenders(url, runner).items():
            for contender in group.values():
                check(runner, op, contender)
            print(f"\n{op}:")

            def run_round(name: str, group: dict[str, Contender] = group) -> tuple[float, float]:
                return timed_round(runner, group[name], seconds)

            rounds, cpu = interleaved_rounds(list(group), run_round, passes)
            for name, contender in group.items():
                row = {
                    "ops": median(rounds[name]),
                    "us": 1e6 / median(rounds[name]),
                    "cpu_us": median(cpu[name]),
                    "ratio": _paired(rounds[name], rounds[contender.floor]),
                }
                if contender.rival is not None:
                    row["vs_rival"] = _paired(rounds[name], rounds[contender.rival])
                with counting_requests() as counter:
                    invoke(runner, contender)
                row["requests"] = float(counter.requests)
                table[f"{op}: {name}"] = row
    return table


def _paired(mine: list[float], theirs: list[float]) -> float:
    return median([a / b for a, b in zip(mine, theirs, strict=True)])


def _arguments(parser: argparse.ArgumentParser) -> None:
    # Short rounds, many passes: a contender's round and its floor's run close together.
    parser.add_argument("--passes", type=int, default=15)
    parser.add_argument("--seconds", type=float, default=0.1, help="per contender per pass")


def main() -> None:
    args = parse_args(__doc__.splitlines()[0], _arguments)
    passes, seconds = (2, 0.05) if args.quick else (args.passes, args.seconds)
    with seawall.server() as url:
        admin = redis.Redis.from_url(url)
        print(f"cache_bulk: {machine_note()}; {server_note(admin)}")
        print(f"{KEYS} keys per call; {passes} passes of {seconds} s per contender")
        admin.close()
        table = measure(url, passes, seconds)
    print()
    print(format_table(COLUMNS, table, first=FIRST))
    print(
        "\nx floor: calls/s over bare redis-py's (sync) or redis.asyncio's (aio) in the same "
        "pass; x rival: over dogpile.cache's (sync) or cashews' (aio)"
    )
    print("\nGoals:\n" + format_goals(GOALS, table))
    write_json(args.json, "cache_bulk", table, {"passes": passes, "seconds": seconds})


if __name__ == "__main__":
    main()
