"""A stale value a flight was answered is shared by the callers of its process that come
just after it: they make no read of their own. It stays shared at most the L1's lifetime,
never past the value's real expiry, and not once a refresh, set or delete of the key has
landed (a refresh's write-back publishes the invalidation a set does).

Two caches on two clients stand for two processes: each client has its own invalidation
listener, which hears the other's messages as another process's.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from conftest import Target

import seawall
import seawall.aio

# Fresh 0.2 s, then stale for 30 s; shared stale values could live the 5 s of the L1.
OPTIONS: dict[str, Any] = {"ttl": 0.2, "stale_ttl": 30, "jitter": 0, "l1_ttl": 5.0}
CALLERS = 50


def calls(r: Any) -> dict[str, int]:
    stats = r.info("commandstats")
    names = ("mget", "evalsha")
    return {name: int(stats.get(f"cmdstat_{name}", {}).get("calls", 0)) for name in names}


def _never() -> Any:
    raise AssertionError("this process must not load")


async def _never_async() -> Any:
    raise AssertionError("this process must not load")


def slow(value: str, seconds: float) -> Callable[[], str]:
    def load() -> str:
        time.sleep(seconds)
        return value

    return load


def slow_async(value: str, seconds: float) -> Callable[[], Any]:
    async def load() -> str:
        await asyncio.sleep(seconds)
        return value

    return load


def until(condition: Callable[[], bool], timeout: float) -> float:
    """Seconds until `condition()` held (polled); fails after `timeout`."""
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < timeout, "condition not met in time"
        time.sleep(0.01)
    return time.monotonic() - started


async def until_async(condition: Callable[[], Any], timeout: float) -> float:
    started = time.monotonic()
    while not await condition():
        assert time.monotonic() - started < timeout, "condition not met in time"
        await asyncio.sleep(0.01)
    return time.monotonic() - started


# --- callers that come after a flight share its stale answer ----------------------------------


def test_callers_of_a_stale_key_make_one_read_per_process(standalone: Target, world: str) -> None:
    # 50 callers start 2 ms apart, each after the one before has its answer (a read is a
    # fraction of a millisecond): without sharing, each made its own flight, a plain read
    # and a fetch script each (about 100 requests); shared, the process makes one of each.
    r = standalone.sync()
    if world == "sync":
        refresher = seawall.Cache(standalone.sync(), "shared", **OPTIONS)
        reader = seawall.Cache(standalone.sync(), "shared", **OPTIONS)
        listener = reader._listener()
        assert listener is not None and listener.wait_listening(10)
        refresher.set("k", "v1")
        time.sleep(0.3)  # stale now
        assert refresher.get_or_load("k", slow("v2", 1.0)) == "v1"  # it refreshes, 1 s
        r.config_resetstat()
        read = reader.get_or_load
        answers: list[Any] = []
        threads = []
        for _ in range(CALLERS):
            thread = threading.Thread(target=lambda: answers.append(read("k", _never)))
            thread.start()
            threads.append(thread)
            time.sleep(0.002)
        for thread in threads:
            thread.join()
        sent = calls(r)
        stats = reader.stats()
        until(lambda: reader.get_or_load("k", lambda: "v2") == "v2", 5.0)  # the refresh landed
    else:

        async def main() -> tuple[list[Any], dict[str, int], Any]:
            clients = [standalone.aio(), standalone.aio()]
            try:
                refresher = seawall.aio.Cache(clients[0], "shared", **OPTIONS)
                reader = seawall.aio.Cache(clients[1], "shared", **OPTIONS)
                listener = reader._listener()
                assert listener is not None and await listener.wait_listening(10)
                await refresher.set("k", "v1")
                await asyncio.sleep(0.3)
                assert await refresher.get_or_load("k", slow_async("v2", 1.0)) == "v1"
                r.config_resetstat()
                tasks = []
                for _ in range(CALLERS):
                    tasks.append(asyncio.create_task(reader.get_or_load("k", _never_async)))
                    await asyncio.sleep(0.002)
                found = list(await asyncio.gather(*tasks))
                sent = calls(r)
                stats = reader.stats()

                async def refreshed() -> bool:
                    return await reader.get_or_load("k", slow_async("v2", 0)) == "v2"

                await until_async(refreshed, 5.0)
                return found, sent, stats
            finally:
                for client in clients:
                    await client.aclose()

        answers, sent, stats = asyncio.run(main())
    assert answers == ["v1"] * CALLERS
    assert sent == {"mget": 1, "evalsha": 1}, sent
    assert stats.stale_served == CALLERS and stats.loads == 0


# --- and stop sharing it once the key changes -------------------------------------------------


@pytest.mark.parametrize("change", ["refresh", "refresh_many", "set", "delete"])
def test_a_shared_stale_value_is_dropped_when_the_key_changes(
    target: Target, world: str, change: str
) -> None:
    # The reader shares v1 (it would for the L1's 5 s); once the refresh (1 s loader), a
    # set or a delete has landed in the other "process", the reader gets the new value at
    # the next read, as its L1 would after an invalidation (milliseconds here, tens of ms
    # on the cluster; the bound leaves the machine's noise room, far below the 5 s).
    if world == "sync":
        refresher, reader = _refresher_and_reader(target, "changes", OPTIONS)
        if change == "refresh_many":
            # get_or_load_many refreshes a stale key in line: in a thread of the refresher.
            load = slow("v2", 1.0)
            many = threading.Thread(
                target=lambda: refresher.get_or_load_many(["k"], lambda keys: {"k": load()})
            )
            many.start()
            until(lambda: refresher.stats().misses >= 1, 5.0)  # elected: the lease is taken
        else:
            assert refresher.get_or_load("k", slow("v2", 1.0)) == "v1"
        assert reader.get_or_load("k", _never) == "v1"
        assert reader.get_or_load("k", _never) == "v1"  # shared: no read of its own
        if change == "refresh":
            until(lambda: refresher.get("k") == "v2", 5.0)
            expected = "v2"
        elif change == "refresh_many":
            many.join(5.0)
            expected = "v2"
        elif change == "set":
            refresher.set("k", "v3")
            expected = "v3"
        else:
            refresher.delete("k")
            expected = "v4"
        took = until(lambda: reader.get_or_load("k", lambda: "v4") == expected, 1.5)
        if change != "refresh":  # the voided refresh must not have overwritten it
            time.sleep(1.0)
            assert reader.get_or_load("k", _never) == expected
    else:

        async def main() -> float:
            clients = [target.aio(), target.aio()]
            try:
                refresher, reader = await _refresher_and_reader_async(clients, "changes", OPTIONS)
                if change == "refresh_many":
                    load = slow_async("v2", 1.0)

                    async def load_many(keys: list[str]) -> dict[str, str]:
                        return {"k": await load()}

                    many = asyncio.create_task(refresher.get_or_load_many(["k"], load_many))
                    while refresher.stats().misses < 1:  # elected: the lease is taken
                        await asyncio.sleep(0.005)
                else:
                    assert await refresher.get_or_load("k", slow_async("v2", 1.0)) == "v1"
                assert await reader.get_or_load("k", _never_async) == "v1"
                assert await reader.get_or_load("k", _never_async) == "v1"
                if change == "refresh_many":
                    assert await many == {"k": "v2"}
                    expected = "v2"
                elif change == "refresh":

                    async def landed() -> bool:
                        return await refresher.get("k") == "v2"

                    await until_async(landed, 5.0)
                    expected = "v2"
                elif change == "set":
                    await refresher.set("k", "v3")
                    expected = "v3"
                else:
                    await refresher.delete("k")
                    expected = "v4"

                async def load_v4() -> str:
                    return "v4"

                async def seen() -> bool:
                    return await reader.get_or_load("k", load_v4) == expected

                took = await until_async(seen, 1.5)
                if change != "refresh":
                    await asyncio.sleep(1.0)
                    assert await reader.get_or_load("k", _never_async) == expected
                return took
            finally:
                for client in clients:
                    await client.aclose()

        took = asyncio.run(main())
    print(f"\n{change}: the reader had the new value {took * 1000:.0f} ms after it landed")


def test_a_shared_stale_value_is_not_served_past_its_real_expiry(
    target: Target, world: str
) -> None:
    # Stale for 0.5 s only, then gone from Redis; the refresh (1.5 s loader) lands well
    # after that. The reader shares v1 with 0.4 s of its life left: a read after the real
    # expiry finds no value, waits for the refresh, and gets v2, never the shared v1.
    options = {**OPTIONS, "stale_ttl": 0.5}
    if world == "sync":
        refresher, reader = _refresher_and_reader(target, "expiry", options)
        assert refresher.get_or_load("k", slow("v2", 1.5)) == "v1"
        assert reader.get_or_load("k", _never) == "v1"
        time.sleep(0.6)  # past the real expiry (0.7 s after the set)
        assert reader.get_or_load("k", _never) == "v2"
        stats = reader.stats()
    else:

        async def main() -> Any:
            clients = [target.aio(), target.aio()]
            try:
                refresher, reader = await _refresher_and_reader_async(clients, "expiry", options)
                assert await refresher.get_or_load("k", slow_async("v2", 1.5)) == "v1"
                assert await reader.get_or_load("k", _never_async) == "v1"
                await asyncio.sleep(0.6)
                assert await reader.get_or_load("k", _never_async) == "v2"
                return reader.stats()
            finally:
                for client in clients:
                    await client.aclose()

        stats = asyncio.run(main())
    assert stats.stale_served == 1 and stats.waits == 1


# --- the refresh starts on a thread that already runs (sync) ---------------------------------


def test_sync_refreshes_run_on_reused_threads(standalone: Target) -> None:
    # Thread.start() waits for the new thread to run: among a process's waking threads,
    # the caller that starts a refresh would wait its turn for the GIL twice more. So the
    # refresh goes to a pool thread that is waiting for work, started only when none is.
    cache = seawall.Cache(standalone.sync(), "reuse", ttl=0.1, stale_ttl=30, jitter=0)
    ran_on: list[threading.Thread] = []

    def loader() -> str:
        ran_on.append(threading.current_thread())
        return "v"

    assert cache.get_or_load("k", loader) == "v"  # loaded by the caller itself
    before: list[threading.Thread] = []
    for refreshes in (1, 2, 3):
        time.sleep(0.15)  # stale
        before = threading.enumerate()
        assert cache.get_or_load("k", loader) == "v"
        until(lambda refreshes=refreshes: len(ran_on) == 1 + refreshes, 5.0)
        if refreshes > 1:  # the first may have started the pool's thread
            assert ran_on[-1] in before
    assert ran_on[0] is threading.current_thread()
    assert {thread.name for thread in ran_on[1:]} == {"seawall-background"}


def _refresher_and_reader(
    target: Target, name: str, options: dict[str, Any]
) -> tuple[seawall.Cache, seawall.Cache]:
    """Two caches of one namespace as two processes hold them (the reader's listener
    subscribed), 0.3 s after the refresher set "k" to v1."""
    refresher = seawall.Cache(target.sync(), name, **options)
    reader = seawall.Cache(target.sync(), name, **options)
    listener = reader._listener()
    assert listener is not None and listener.wait_listening(10)
    refresher.set("k", "v1")
    time.sleep(0.3)
    return refresher, reader


async def _refresher_and_reader_async(
    clients: list[Any], name: str, options: dict[str, Any]
) -> tuple[seawall.aio.Cache, seawall.aio.Cache]:
    """_refresher_and_reader in asyncio, over two clients."""
    refresher = seawall.aio.Cache(clients[0], name, **options)
    reader = seawall.aio.Cache(clients[1], name, **options)
    listener = reader._listener()
    assert listener is not None and await listener.wait_listening(10)
    await refresher.set("k", "v1")
    await asyncio.sleep(0.3)
    return refresher, reader
