"""Idempotent.run records a handler's run whatever it returns, refuses an async handler in
the sync class before running anything, and counts each waiting duplicate once (issue 10,
item 10 and the `waiters` suspicion)."""

from __future__ import annotations

import asyncio
import datetime
import decimal
import threading
from typing import Any

import pytest
import redis

import seawall
import seawall.aio

WHEN = datetime.datetime(2026, 11, 23, 12, 0, tzinfo=datetime.UTC)


def deliveries(guard: Any, message_id: str, handler: Any, times: int) -> list[Any]:
    """What `times` deliveries of one message got: the outcome, or the error's class."""
    got: list[Any] = []
    for _ in range(times):
        try:
            got.append(guard.run(message_id, handler))
        except Exception as exc:
            got.append(type(exc).__name__)
    return got


@pytest.mark.parametrize("outcome", [WHEN, decimal.Decimal("9.99")], ids=["datetime", "decimal"])
def test_unencodable_outcome_is_recorded_as_done(seawall_redis: redis.Redis, outcome: Any) -> None:
    guard = seawall.Idempotent(seawall_redis, "pay")
    charges: list[int] = []

    def charge_card() -> Any:
        charges.append(1)
        return outcome

    got = deliveries(guard, "order-1", charge_card, 3)
    assert len(charges) == 1  # charged once, whatever the redeliveries
    assert got[0] == outcome  # the caller that ran it gets the live result
    assert got[1:] == ["IdempotentOutcomeError"] * 2
    with pytest.raises(seawall.IdempotentOutcomeError, match=r"'order-1'.*not JSON") as caught:
        guard.run("order-1", charge_card)
    assert caught.value.message_id == "order-1"
    with pytest.raises(seawall.IdempotentOutcomeError):
        guard.recorded("order-1")
    assert len(charges) == 1


def test_unencodable_outcome_is_recorded_as_done_asyncio(seawall_url: str) -> None:
    async def main() -> None:
        r = redis.asyncio.Redis.from_url(seawall_url)
        try:
            guard = seawall.aio.Idempotent(r, "pay-aio")
            charges: list[int] = []

            async def charge_card() -> Any:
                charges.append(1)
                return WHEN

            assert await guard.run("order-1", charge_card) == WHEN
            for _ in range(2):
                with pytest.raises(seawall.IdempotentOutcomeError, match="'order-1'"):
                    await guard.run("order-1", charge_card)
            assert charges == [1]
        finally:
            await r.aclose()

    asyncio.run(main())


def test_sync_guard_refuses_async_handler_before_it_runs(seawall_redis: redis.Redis) -> None:
    guard = seawall.Idempotent(seawall_redis, "refuse")
    ran: list[str] = []

    async def charge_card() -> str:
        ran.append("charged")
        return "ok"

    with pytest.raises(TypeError, match=r"seawall\.aio\.Idempotent"):
        guard.run("m", charge_card)
    assert seawall_redis.exists(guard.key("m")) == 0  # not even claimed
    # A plain function that hands back a coroutine is refused too, its claim given up.
    with pytest.raises(TypeError, match=r"seawall\.aio\.Idempotent"):
        guard.run("m", lambda: charge_card())
    assert ran == []
    assert guard.recorded("m") == (False, None)
    assert guard.run("m", lambda: "sync") == "sync"


def test_a_waiting_duplicate_is_counted_once(seawall_redis: redis.Redis) -> None:
    # A short lease: the duplicate looks again every ~0.3 s while the claimant runs.
    guard = seawall.Idempotent(seawall_redis, "count", lease=0.3, timeout=1.5)
    running, finish = threading.Event(), threading.Event()

    def slow() -> str:
        running.set()
        assert finish.wait(10)
        return "done"

    first = threading.Thread(target=lambda: guard.run("m", slow))
    first.start()
    try:
        assert running.wait(10)
        with pytest.raises(seawall.IdempotencyTimeout):
            guard.run("m", slow)
        assert int(seawall_redis.hget(guard.key("m"), "waiters") or 0) == 1
    finally:
        finish.set()
        first.join(10)
    assert guard.recorded("m") == (True, "done")
    # One wake-up token per waiter: nothing left over for the next waiter to spin on.
    assert seawall_redis.llen(f"{guard.key('m')}:wake") <= 1
