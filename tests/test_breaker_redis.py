"""The circuit breaker driven by calls to a real server that dies, freezes and comes back."""

from __future__ import annotations

import time
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from seawall.cache._breaker import CircuitBreaker


def guarded_ping(client: redis.Redis, breaker: CircuitBreaker) -> str:
    """What the cache does around each Redis call: 'skipped', 'ok' or 'failed'."""
    if not breaker.allow():
        return "skipped"
    try:
        client.ping()
    except redis.TimeoutError:
        breaker.failure(timed_out=True)
        return "failed"
    except redis.ConnectionError:
        breaker.failure()
        return "failed"
    breaker.success()
    return "ok"


def test_breaker_opens_within_a_second_of_a_dead_or_frozen_redis(
    seawall_server_factory: Any,
) -> None:
    server = seawall_server_factory()
    # open_for: long enough that a stalled machine does not let a half-open probe in among
    # the 100 calls that must be skipped below.
    breaker = CircuitBreaker(failure_threshold=3, open_for=2.0, call_timeout=0.25)
    client = redis.Redis.from_url(
        server.url,
        socket_timeout=breaker.call_timeout,
        socket_connect_timeout=breaker.call_timeout,
        retry=Retry(NoBackoff(), 0),  # the breaker decides, not hidden retries
    )
    try:
        assert guarded_ping(client, breaker) == "ok"

        # Frozen (SIGSTOP): the first call waits call_timeout, then the breaker is open.
        server.pause()
        frozen = time.monotonic()
        outcomes = []
        while breaker.state == "closed":
            outcomes.append(guarded_ping(client, breaker))
        opened_after = time.monotonic() - frozen
        assert opened_after <= 1.0, opened_after
        started = time.monotonic()
        assert [guarded_ping(client, breaker) for _ in range(100)] == ["skipped"] * 100
        # Nobody waits on the frozen server (100 waits would take 100 x call_timeout = 25 s).
        assert time.monotonic() - started < 5.0
        server.resume()
        time.sleep(breaker.open_for)
        assert guarded_ping(client, breaker) == "ok"  # the half-open probe
        assert breaker.state == "closed"

        # Killed: connections are refused at once; three failures open it.
        server.kill()
        killed = time.monotonic()
        while breaker.state == "closed":
            guarded_ping(client, breaker)
        assert time.monotonic() - killed <= 1.0
        server.restart()
        deadline = time.monotonic() + 10
        while guarded_ping(client, breaker) != "ok":  # probes every open_for until back
            assert time.monotonic() < deadline, "the breaker never closed after a restart"
            time.sleep(0.05)
        assert breaker.state == "closed" and breaker.times_opened >= 2
        print(f"frozen: opened after {opened_after:.2f} s; outcomes {outcomes}")
    finally:
        if server.paused:
            server.resume()
        client.close()
