"""Acceptance 8 (and 10): seawall.Cache under steady load while Redis is killed or frozen.

500 requests a second from 8 threads, 90% over 1,000 warm keys (all held in L1) and 10% on
keys never seen before (each one a loader call). Part way through, Redis is SIGKILLed (and
restarted from its AOF) or SIGSTOPped (and resumed). Every request's outcome and latency,
every loader call and the breaker's state changes are recorded with time.monotonic(), and
the run is judged afterwards:

- no request for a warm key fails, in the outage or out of it;
- the breaker opens within 1 s of the fault;
- while Redis is away the loader is called at most burst + rate_per_s times in any 1 s;
- within 2 s of Redis answering again the breaker is closed (a request was served by
  Redis), and from then on nothing fails, nothing is served stale, L1 invalidation listens;
- no request blocks longer than one Redis call's timeout (plus scheduling margin).
"""

from __future__ import annotations

import asyncio
import functools
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import redis
import redis.asyncio.cluster
import redis.cluster
from redis.backoff import NoBackoff
from redis.retry import Retry

import seawall
import seawall.aio

RATE = 500  # requests per second, all threads together
THREADS = 8
WARM = 1_000
COLD_SHARE = 0.1  # of requests, for keys nobody asked for before: loader calls
CALL_TIMEOUT = 0.25  # the breaker's call_timeout = the client's socket timeouts
OPEN_FOR = 0.5
LOADER_RATE, LOADER_BURST = 20.0, 5
# A request may pay one Redis call's timeout; the rest is for a machine shared with
# other test runs (2 cores).
MAX_BLOCK = CALL_TIMEOUT + 0.75


def client_options() -> dict[str, Any]:
    # Each call bounded by call_timeout, and no hidden retries: the breaker decides.
    return {
        "socket_timeout": CALL_TIMEOUT,
        "socket_connect_timeout": CALL_TIMEOUT,
        "retry": Retry(NoBackoff(), 0),
    }


def make_cache(client: Any, name: str, kind: Any = seawall.Cache, **options: Any) -> Any:
    return kind(
        client,
        name,
        ttl=120,  # nothing expires in Redis during the run; L1 entries live 5 s
        breaker=seawall.CircuitBreaker(
            failure_threshold=3, open_for=OPEN_FOR, call_timeout=CALL_TIMEOUT
        ),
        loader_limit=seawall.RateLimiter(rate_per_s=LOADER_RATE, burst=LOADER_BURST),
        **options,
    )


@dataclass
class Run:
    """What one run recorded, all on time.monotonic()."""

    requests: list[tuple[float, float, bool, str | None]] = field(default_factory=list)
    loads: list[float] = field(default_factory=list)
    samples: list[tuple[float, bool, int]] = field(default_factory=list)  # listening, stale
    fault_at: float = 0.0
    back_at: float = 0.0
    ended_at: float = 0.0


def loader(run: Run, key: str) -> Any:
    run.loads.append(time.monotonic())
    time.sleep(0.001)  # a quick indexed query
    return {"id": key}


def generate(cache: seawall.Cache, run: Run, index: int, start: float, end: float) -> None:
    """One thread's share of the steady rate, on a fixed schedule (open loop)."""
    rng = random.Random(index)
    interval = THREADS / RATE
    due = start + index * interval / THREADS
    n = 0
    while due < end:
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        n += 1
        due += interval
        warm = rng.random() >= COLD_SHARE
        key = f"k{rng.randrange(WARM)}" if warm else f"cold:{index}:{n}"
        began = time.monotonic()
        try:
            value = cache.get_or_load(key, functools.partial(loader, run, key))
            error = None if value == {"id": key} else f"wrong value {value!r}"
        except Exception as exc:
            error = repr(exc)
        run.requests.append((began, time.monotonic() - began, warm, error))


def monitor(cache: Any, listener: Any, run: Run, stop: threading.Event) -> None:
    """Samples whether L1 invalidation listens and how many answers were served stale."""
    while not stop.wait(0.05):
        run.samples.append((time.monotonic(), listener.listening, cache.stats().stale_served))


def run_outage(
    cache: seawall.Cache,
    *,
    duration: float,
    fault_after: float,
    outage: float,
    fault: Callable[[], None],
    recover: Callable[[], None],
) -> Run:
    """Warm the cache, run the load, inject the fault and its end; returns the records."""
    listener = cache._listener()
    assert listener is not None and listener.wait_listening(10)
    assert cache.warm({f"k{i}": {"id": f"k{i}"} for i in range(WARM)}) == WARM
    held = {f"k{i}" for i in range(WARM) if f"k{i}" in cache.l1._entries}
    assert len(held) == WARM  # every warm key is in L1 when the load starts
    run = Run()
    start = time.monotonic() + 0.1
    end = start + duration
    stop = threading.Event()
    threads = [
        threading.Thread(target=generate, args=(cache, run, i, start, end), daemon=True)
        for i in range(THREADS)
    ]
    threads.append(threading.Thread(target=monitor, args=(cache, listener, run, stop), daemon=True))
    for thread in threads:
        thread.start()
    try:
        time.sleep(max(0.0, start + fault_after - time.monotonic()))
        run.fault_at = time.monotonic()
        fault()
        time.sleep(max(0.0, run.fault_at + outage - time.monotonic()))
        recover()
        run.back_at = time.monotonic()  # Redis answers again
    finally:
        for thread in threads[:-1]:
            thread.join(duration + 30)
        stop.set()
        threads[-1].join(5)
    run.ended_at = time.monotonic()
    return run


def served_after(cache: seawall.Cache) -> None:
    # After the end, Redis serves: a key never seen is loaded and written back.
    assert cache.get_or_load("after", lambda: {"id": "after"}) == {"id": "after"}
    assert cache.l1.discard("after") is None and cache.get("after") == {"id": "after"}


def judge(run: Run, cache: seawall.Cache, label: str, duration: float) -> None:
    requests = run.requests
    breaker = cache.breaker
    assert breaker is not None
    warm_errors = [r for r in requests if r[2] and r[3] is not None]
    cold_errors = [r for r in requests if not r[2] and r[3] is not None]
    rate = len(requests) / duration
    # The breaker's changes after the fault.
    changes = [(t, state) for t, state in breaker.transitions if t >= run.fault_at]
    opened = next((t for t, state in changes if state == "open"), None)
    assert opened is not None, list(breaker.transitions)
    # Closed by the first request Redis served again: after a restart that may come a
    # moment before restart() returns (the server answers before the launcher sees it).
    closed = next((t for t, state in changes if state == "closed" and t > opened), None)
    assert closed is not None, [c for c in changes if c[0] >= run.back_at - 1.0]
    assert closed >= run.back_at - 1.0, (closed, run.back_at)  # not while Redis was away
    # Loader calls while Redis was away, in every 1 s window starting at one of them.
    away = [t for t in run.loads if run.fault_at <= t < run.back_at]
    busiest = max(
        (sum(1 for u in away if t <= u < t + 1.0) for t in away if t + 1.0 <= run.back_at),
        default=0,
    )
    # Steady again: from the last sign of the outage after Redis came back.
    signs = [run.back_at]
    signs += [began + took for began, took, _, error in requests if error and began >= run.back_at]
    stale_before = None
    for t, listening, stale in run.samples:
        if t < run.back_at:
            stale_before = stale
            continue
        if not listening or stale != stale_before:
            signs.append(t)
        stale_before = stale
    signs += [t for t, state in breaker.transitions if t >= run.back_at and state != "closed"]
    steady = max(signs)
    slowest = max(took for _, took, _, _ in requests)
    print(
        f"\n{label}: {len(requests)} requests ({rate:.0f}/s), "
        f"{sum(1 for r in requests if r[2])} warm with {len(warm_errors)} errors, "
        f"{len(cold_errors)} cold ones refused (CacheUnavailable); "
        f"breaker open {opened - run.fault_at:.3f} s after the fault, "
        f"closed {closed - run.back_at:.3f} s after Redis came back, "
        f"steady {steady - run.back_at:.3f} s after; "
        f"loader calls while away: {len(away)} in {run.back_at - run.fault_at:.1f} s, "
        f"busiest 1 s window {busiest} (cap {LOADER_BURST} + {LOADER_RATE:.0f}/s); "
        f"slowest request {slowest:.3f} s; breaker opened {breaker.times_opened} times"
    )
    assert len(run.samples) > 10 * duration
    assert rate >= 0.9 * RATE, rate  # the load generator kept up
    assert warm_errors == [], warm_errors[:5]
    assert all("CacheUnavailable" in str(r[3]) for r in cold_errors), cold_errors[:5]
    assert opened - run.fault_at <= 1.0
    assert busiest <= LOADER_BURST + LOADER_RATE, busiest
    assert len(away) > 0  # the cold keys did reach the loader while Redis was away
    assert closed - run.back_at <= 2.0
    assert steady - run.back_at <= 2.0
    assert slowest <= MAX_BLOCK, slowest


# --- acceptance 8: one server, SIGKILL (restart from AOF) and SIGSTOP ---------------------


def test_redis_killed_under_load(seawall_server_factory: Any) -> None:
    # Comes back with its data: a SIGKILL loses nothing the server wrote to its AOF, which
    # the OS holds. appendfsync "no" (the launcher's appendonly says "always") because an
    # fsync per write on a disk shared with the suite's databases can stall the server past
    # the breaker's call_timeout after the restart, which this test would rightly count.
    server = seawall_server_factory(appendonly=True, extra_args=["--appendfsync", "no"])
    _outage_under_load(server, "down-kill", server.kill, server.restart, "SIGKILL")


def test_redis_frozen_under_load(seawall_server_factory: Any) -> None:
    server = seawall_server_factory()
    _outage_under_load(server, "down-stop", server.pause, server.resume, "SIGSTOP")


def _outage_under_load(server: Any, namespace: str, fault: Any, recover: Any, what: str) -> None:
    """30 s of load on one server's cache, `fault` 5 s in and `recover` 12 s later."""
    client = redis.Redis.from_url(server.url, **client_options())
    cache = make_cache(client, namespace)
    try:
        run = run_outage(
            cache, duration=30.0, fault_after=5.0, outage=12.0, fault=fault, recover=recover
        )
        judge(run, cache, what, 30.0)
        served_after(cache)
    finally:
        if server.paused:
            server.resume()
        client.close()


# --- acceptance 10: the SIGSTOP variant on the 3+3 cluster, asyncio, shorter ------------


# Alone: six nodes thawing together after a freeze past their node timeout gossip their
# way back, and beside three busy workers a call then and then takes over call_timeout
# (the breaker rightly opens again: "steady" came 3 s after the thaw instead of 2).
@pytest.mark.serial
def test_cluster_frozen_under_load_asyncio(seawall_cluster_factory: Any) -> None:
    """Every node of a 3+3 cluster frozen at once (the whole of Redis goes away) for 4 s
    of a 10 s run, with seawall.aio.Cache and 8 tasks. A cluster of its own: a freeze of
    every node may shuffle roles afterwards.

    asyncio, because there each Redis call is bounded by the breaker's call_timeout: a
    sync RedisCluster client, on a timeout, asks the nodes for the slot map again, one
    after the other, each bounded only by the socket timeout (docs/cache.md).
    """
    group = seawall_cluster_factory()

    def freeze() -> None:
        for node in group.nodes:
            node.pause()

    def thaw() -> None:
        for node in group.nodes:
            node.resume()

    async def main() -> tuple[Run, Any]:
        client = redis.asyncio.cluster.RedisCluster.from_url(group.url, **client_options())
        cache = make_cache(client, "down-cluster", seawall.aio.Cache)
        try:
            run = await run_outage_async(
                cache, duration=10.0, fault_after=2.0, outage=4.0, fault=freeze, recover=thaw
            )
            assert await cache.get_or_load("after", lambda: {"id": "after"}) == {"id": "after"}
            cache.l1.discard("after")
            assert await cache.get("after") == {"id": "after"}
            return run, cache
        finally:
            await client.aclose()

    try:
        run, cache = asyncio.run(main())
    finally:
        thaw()
    judge(run, cache, "cluster SIGSTOP (asyncio)", 10.0)


async def generate_async(cache: Any, run: Run, index: int, start: float, end: float) -> None:
    rng = random.Random(index)
    interval = THREADS / RATE
    due = start + index * interval / THREADS
    n = 0

    async def load(key: str) -> Any:
        return loader(run, key)

    while due < end:
        delay = due - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        n += 1
        due += interval
        warm = rng.random() >= COLD_SHARE
        key = f"k{rng.randrange(WARM)}" if warm else f"cold:{index}:{n}"
        began = time.monotonic()
        try:
            value = await cache.get_or_load(key, functools.partial(load, key))
            error = None if value == {"id": key} else f"wrong value {value!r}"
        except Exception as exc:
            error = repr(exc)
        run.requests.append((began, time.monotonic() - began, warm, error))


async def run_outage_async(
    cache: Any,
    *,
    duration: float,
    fault_after: float,
    outage: float,
    fault: Callable[[], None],
    recover: Callable[[], None],
) -> Run:
    """run_outage for seawall.aio.Cache: 8 tasks in one event loop."""
    listener = cache._listener()
    assert listener is not None and await listener.wait_listening(10)
    assert await cache.warm({f"k{i}": {"id": f"k{i}"} for i in range(WARM)}) == WARM
    assert all(f"k{i}" in cache.l1._entries for i in range(WARM))
    run = Run()
    start = time.monotonic() + 0.1
    end = start + duration
    stop = threading.Event()
    sampler = threading.Thread(target=monitor, args=(cache, listener, run, stop), daemon=True)
    sampler.start()
    tasks = [asyncio.create_task(generate_async(cache, run, i, start, end)) for i in range(THREADS)]
    try:
        await asyncio.sleep(max(0.0, start + fault_after - time.monotonic()))
        run.fault_at = time.monotonic()
        fault()  # signals only: does not block the loop
        await asyncio.sleep(max(0.0, run.fault_at + outage - time.monotonic()))
        recover()
        run.back_at = time.monotonic()
    finally:
        await asyncio.gather(*tasks)
        stop.set()
        sampler.join(5)
    run.ended_at = time.monotonic()
    return run


def test_sync_cluster_client_errors_count_as_redis_down(seawall_cluster_factory: Any) -> None:
    """A sync RedisCluster that reaches no node raises RedisClusterException, which is not
    a RedisError: the cache must degrade on it too, not pass it to the caller."""
    group = seawall_cluster_factory(masters=1, replicas_per_master=0)
    client = redis.cluster.RedisCluster.from_url(group.url, **client_options())
    # L1 entries live 0.5 s here: the copy read below is past that, so it can only come
    # from the degraded path (a recent stale copy), not from an ordinary L1 hit.
    cache = make_cache(client, "cluster-gone", l1_ttl=0.5)
    try:
        listener = cache._listener()
        assert listener is not None and listener.wait_listening(10)
        cache.set("held", "copy")
        assert cache.get_or_load("held", lambda: "unused") == "copy"
        group.nodes[0].kill()
        raised: list[str] = []
        for _ in range(5):
            try:
                client.get("probe")
            except Exception as exc:
                raised.append(type(exc).__name__)
        # The situation under test: the client's own error is not a RedisError.
        assert "RedisClusterException" in raised, raised
        assert cache.get_or_load("new", lambda: "from-db") == "from-db"  # loader, limited
        time.sleep(0.6)
        assert cache.get_or_load("held", lambda: "unused") == "copy"  # the L1 copy
        assert cache.stats().stale_served >= 1
    finally:
        client.close()
