"""Code that runs in child processes of the stock tests (multiprocessing "spawn").

Every seller says it is ready (INCR of READY_KEY), then waits for a start token (BLPOP on
START_KEY); the test hands out the tokens once all are ready, so all processes of a sale
begin together however long each took to be scheduled. Each returns its own ledger.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import redis
import redis.exceptions
from lockworkers import async_client, sync_client

import seawall
import seawall.aio

START_KEY = "{start}:stock-sale"
READY_KEY = "{start}:stock-ready"
START_TIMEOUT = 30


def warm() -> int:
    """Nothing: makes a pool process import this module (and redis, seawall) ahead of time."""
    return 0


def start_sellers(client: Any, processes: int) -> None:
    """Start `processes` sellers together, once every one of them is waiting."""
    give_up = time.monotonic() + START_TIMEOUT
    while int(client.get(READY_KEY) or 0) < processes:
        assert time.monotonic() < give_up, "the sellers never got ready"
        time.sleep(0.002)
    client.delete(READY_KEY)
    client.rpush(START_KEY, *range(processes))


def _await_start(r: Any) -> None:
    r.incr(READY_KEY)
    assert r.blpop([START_KEY], START_TIMEOUT) is not None, "no start token"


async def _await_start_async(r: Any) -> None:
    await r.incr(READY_KEY)
    assert await r.blpop([START_KEY], START_TIMEOUT) is not None, "no start token"


def sell(
    url: str, cluster: bool, world: str, name: str, order_ids: Sequence[str]
) -> list[tuple[str, bool]]:
    """One take of 1 unit per order id, in order; returns (order id, take's result)."""
    if world == "async":
        return asyncio.run(_sell_async(url, cluster, name, order_ids))
    r = sync_client(url, cluster)
    stock = seawall.Stock(r, name)
    _await_start(r)
    ledger = [(order_id, stock.take(order_id)) for order_id in order_ids]
    r.close()
    return ledger


async def _sell_async(
    url: str, cluster: bool, name: str, order_ids: Sequence[str]
) -> list[tuple[str, bool]]:
    r = async_client(url, cluster)
    stock = seawall.aio.Stock(r, name)
    await _await_start_async(r)
    ledger = [(order_id, await stock.take(order_id)) for order_id in order_ids]
    await r.aclose()
    return ledger


def sell_unsafe(url: str, key: str, attempts: int) -> int:
    """The recipe Stock replaces: read the count, check it, write back one less.

    Returns the units it sold. Two sellers that read the same count both sell and both
    write the same new count: one sale is not counted, so more are sold than there were.
    """
    r = redis.Redis.from_url(url)
    _await_start(r)
    sold = 0
    for _ in range(attempts):
        left = int(r.get(key) or 0)
        if left > 0:
            r.set(key, left - 1)
            sold += 1
    r.close()
    return sold


# Connection trouble a take may meet while its server restarts; the take is then retried
# with the same order id, which is what makes retrying safe.
_RESTART_ERRORS = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    redis.exceptions.BusyLoadingError,
)


def sell_through_restart(
    url: str, name: str, order_ids: Sequence[str], patience: float, pause: float = 0.0
) -> list[tuple[str, bool, int, int]]:
    """Like `sell`, retrying each take until it answers (at most `patience` seconds), and
    waiting `pause` seconds after each unit it gets (so a sale lasts past a crash).

    Returns (order id, result, tries, time.monotonic_ns() of the answer) per order.
    """
    # No socket timeout: a crashed server resets the connection at once, and a timeout
    # would also cut short the wait for the start token.
    r = redis.Redis.from_url(url)
    stock = seawall.Stock(r, name)
    _await_start(r)
    ledger = []
    for order_id in order_ids:
        tries = 0
        give_up = time.monotonic() + patience
        while True:
            tries += 1
            try:
                taken = stock.take(order_id)
                break
            except _RESTART_ERRORS:
                if time.monotonic() > give_up:
                    raise
                time.sleep(0.005)
        ledger.append((order_id, taken, tries, time.monotonic_ns()))
        if taken and pause:
            time.sleep(pause)
    r.close()
    return ledger
