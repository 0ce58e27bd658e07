"""What the tasks that share one seawall.aio flight cost beyond the least their event loop
can do, in one process, side by side in one run.

(a) The wait: 50 tasks enter a timed wait on one event and are woken by one set(), per
round. Contenders: bare futures with no timeout (the floor: the least a wake-up costs),
`asyncio.Event` inside `asyncio.timeout()` (what a timed wait usually is; seawall used it
before), and seawall's AsyncEvent (one timer per event, not per task). Figure: microseconds
of CPU per round, from the first task's start to the last one's end.
(b) A stale read: 50 tasks read one key that has gone stale while one refresh runs (the
pattern of bench/cache_stale.py, in one process). seawall.aio.Cache against one plain GET
shared by the 50 (the floor of cache_stale.py). Figures: CPU per round and the tasks' p50.
Contenders take turns within each pass; the medians of the passes are printed.

    PYTHONPATH=src .venv/bin/python bench/async_flight.py [--quick]
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import redis.asyncio
from _harness import (
    Column,
    Goal,
    Table,
    format_table,
    machine_note,
    median,
    one_async_get_per_key,
    parse_args,
    write_json,
)

import seawall
import seawall.aio
from seawall.shared._async_event import AsyncEvent

TASKS = 50
FRESH = 0.2  # a value's fresh time; the readers come once it is past
REFRESH = 0.3  # the refresh's loader


async def _timed_asyncio_event(event: asyncio.Event) -> bool:
    try:
        async with asyncio.timeout(30.0):
            await event.wait()
    except TimeoutError:
        return False
    return True


async def _wait_round(kind: str) -> float:
    """CPU seconds for TASKS tasks to enter a wait and be woken."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[bool] = loop.create_future()
    plain = asyncio.Event()
    shared = AsyncEvent()

    async def on_future() -> bool:
        return await future

    waits: dict[str, Callable[[], Awaitable[Any]]] = {
        "floor: bare futures, no timeout": on_future,
        "asyncio.Event in asyncio.timeout()": lambda: _timed_asyncio_event(plain),
        "seawall AsyncEvent": lambda: shared.wait(30.0),
    }
    wait = waits[kind]
    started = time.process_time()
    tasks = [asyncio.ensure_future(wait()) for _ in range(TASKS)]
    await asyncio.sleep(0)
    future.set_result(True)
    plain.set()
    shared.set()
    await asyncio.gather(*tasks)
    return time.process_time() - started


async def _stale_round(read: Callable[[str], Awaitable[Any]], key: str) -> tuple[float, float]:
    """(CPU seconds, the tasks' median latency) for TASKS tasks reading `key` at once."""
    start = time.monotonic() + 0.01

    async def reader() -> float:
        await asyncio.sleep(max(0.0, start - time.monotonic()))
        await read(key)
        return time.monotonic() - start

    began = time.process_time()
    latencies = sorted(await asyncio.gather(*(reader() for _ in range(TASKS))))
    return time.process_time() - began, latencies[len(latencies) // 2]


async def _stale_passes(url: str, rounds: int) -> dict[str, list[tuple[float, float]]]:
    reader_client = redis.asyncio.Redis.from_url(url)
    writer_client = redis.asyncio.Redis.from_url(url)
    cache = seawall.aio.Cache(reader_client, "flight", ttl=FRESH, stale_ttl=60, jitter=0)
    writer = seawall.aio.Cache(writer_client, "flight", ttl=FRESH, stale_ttl=60, jitter=0)
    floor_client = redis.asyncio.Redis.from_url(url)

    async def loader() -> str:
        await asyncio.sleep(REFRESH)
        return "value"

    floor_read = one_async_get_per_key(floor_client)
    readers: dict[str, Callable[[str], Awaitable[Any]]] = {
        "floor: one GET per process": floor_read,
        "seawall.aio.Cache": lambda key: cache.get_or_load(key, loader),
    }
    found: dict[str, list[tuple[float, float]]] = {name: [] for name in readers}
    for round_no in range(rounds + 1):
        for name, read in readers.items():
            key = f"{name[:5]}-{round_no}"
            await writer.set(key, "value")
            await floor_client.set(key, "value")
            await asyncio.sleep(FRESH + 0.05)  # stale now
            figures = await _stale_round(read, key)
            if round_no:  # the first round opens connections
                found[name].append(figures)
            await asyncio.sleep(REFRESH + 0.1)  # the refresh lands
    for client in (reader_client, writer_client, floor_client):
        await client.aclose()
    return found


async def _wait_passes(rounds: int) -> dict[str, list[float]]:
    kinds = [
        "floor: bare futures, no timeout",
        "asyncio.Event in asyncio.timeout()",
        "seawall AsyncEvent",
    ]
    found: dict[str, list[float]] = {kind: [] for kind in kinds}
    for _ in range(rounds):
        for kind in kinds:
            found[kind].append(await _wait_round(kind))
    return found


WAIT_FLOOR = "(a) floor: bare futures, no timeout"
STALE_FLOOR = "(b) floor: one GET per process"
FIRST = "contender"
HEADLINE = "vs_floor"
COLUMNS = [
    Column("cpu_us", "CPU us/round", ",.0f"),
    Column("vs_floor", "x its floor", ".2f"),
    Column("p50_ms", "p50 ms", ".2f"),
]
# No goal of an issue is measured here: the figures explain cache_stale's asyncio tail.
GOALS: list[Goal] = []


def main() -> None:
    args = parse_args(__doc__ or "", lambda parser: None)
    wait_rounds, stale_rounds = (200, 10) if args.quick else (2000, 40)
    print(f"async_flight: {machine_note()}; {TASKS} tasks")
    table: Table = {}
    waits = asyncio.run(_wait_passes(wait_rounds))
    floor = median(waits["floor: bare futures, no timeout"])
    for kind, values in waits.items():
        name = WAIT_FLOOR if kind.startswith("floor") else f"(a) {kind}"
        table[name] = {"cpu_us": median(values) * 1e6, "vs_floor": median(values) / floor}
    with seawall.server() as url:
        stale = asyncio.run(_stale_passes(url, stale_rounds))
    floor = median([cpu for cpu, _ in stale["floor: one GET per process"]])
    for reader, rows in stale.items():
        name = STALE_FLOOR if reader.startswith("floor") else f"(b) {reader}"
        cpu = median([c for c, _ in rows])
        p50 = median([p for _, p in rows])
        table[name] = {"cpu_us": cpu * 1e6, "vs_floor": cpu / floor, "p50_ms": p50 * 1e3}
    print(f"(a) a timed wait on one event, {wait_rounds} rounds; (b) a stale key, {stale_rounds}")
    print(format_table(COLUMNS, table, first=FIRST))
    write_json(args.json, "async_flight", table, {"tasks": TASKS})


if __name__ == "__main__":
    main()
