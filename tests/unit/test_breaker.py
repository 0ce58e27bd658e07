"""The circuit breaker and the loader's token bucket, driven by a hand-moved clock."""

import threading

import pytest

from seawall.cache._breaker import CircuitBreaker, RateLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_consecutive_failures_open_and_successes_reset_the_count() -> None:
    clock = Clock()
    breaker = CircuitBreaker(failure_threshold=3, open_for=1.0, clock=clock)
    breaker.failure()
    breaker.failure()
    breaker.success()  # not in a row any more
    breaker.failure()
    breaker.failure()
    assert breaker.state == "closed" and breaker.allow()
    breaker.failure()
    assert breaker.state == "open"
    assert not breaker.allow()
    assert breaker.times_opened == 1 and breaker.rejected == 1


def test_a_timed_out_call_opens_at_once() -> None:
    breaker = CircuitBreaker(failure_threshold=5, clock=Clock())
    breaker.failure(timed_out=True)
    assert breaker.state == "open"


def test_open_waits_open_for_then_lets_one_probe_through() -> None:
    clock = Clock()
    breaker = CircuitBreaker(failure_threshold=1, open_for=1.0, call_timeout=0.25, clock=clock)
    breaker.failure()
    clock.now += 0.999
    assert not breaker.allow()
    clock.now += 0.001
    assert breaker.state == "half-open"
    assert breaker.allow()  # the probe
    assert not breaker.allow()  # one probe at a time
    clock.now += 0.25  # the probe never reported back: another may go
    assert breaker.allow()
    breaker.success()
    assert breaker.state == "closed"
    assert all(breaker.allow() for _ in range(10))


def test_a_failed_probe_opens_again_for_the_full_period() -> None:
    clock = Clock()
    breaker = CircuitBreaker(failure_threshold=3, open_for=2.0, clock=clock)
    breaker.failure(timed_out=True)
    clock.now += 2.0
    assert breaker.allow()
    breaker.failure()  # one failure of the probe is enough
    assert breaker.state == "open" and breaker.times_opened == 2
    clock.now += 1.9
    assert not breaker.allow()
    clock.now += 0.1
    assert breaker.allow()


def test_failures_of_calls_made_before_opening_change_nothing() -> None:
    clock = Clock()
    breaker = CircuitBreaker(failure_threshold=1, open_for=1.0, clock=clock)
    breaker.failure()
    clock.now += 0.5
    breaker.failure()  # a slow call that was allowed while closed
    clock.now += 0.5
    assert breaker.state == "half-open"  # still 1.0 s after the first opening


def test_a_success_reported_after_opening_keeps_it_open() -> None:
    # Thread A's call is answered just before Redis dies; thread B's call fails and opens
    # the breaker; A reports its success after that. Before the fix that closed the
    # breaker 14 ms into a 12 s outage (seen in the SIGKILL-under-load test).
    clock = Clock()
    breaker = CircuitBreaker(failure_threshold=1, open_for=1.0, clock=clock)
    assert breaker.allow()  # A
    assert breaker.allow()  # B
    breaker.failure()  # B
    breaker.success()  # A, late
    assert breaker.state == "open" and not breaker.allow()
    clock.now += 1.0
    assert breaker.allow()  # the probe
    breaker.success()
    assert breaker.state == "closed"


def test_dead_redis_opens_within_one_second() -> None:
    # A frozen Redis: each call gives up after call_timeout; the first one opens.
    clock = Clock()
    breaker = CircuitBreaker(clock=clock)
    start = clock.now
    while breaker.allow():
        clock.now += breaker.call_timeout  # waited, in vain
        breaker.failure(timed_out=True)
    assert clock.now - start <= 1.0
    # A Redis that refuses connections: failures are fast, the threshold opens it.
    refused = CircuitBreaker(clock=clock)
    calls = 0
    while refused.allow():
        calls += 1
        refused.failure()
    assert calls == refused.failure_threshold


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"failure_threshold": 0}, ValueError, "failure_threshold must be >= 1"),
        ({"failure_threshold": 1.5}, TypeError, "failure_threshold must be an int"),
        ({"open_for": 0}, ValueError, "open_for must be a finite number > 0"),
        ({"open_for": float("inf")}, ValueError, "open_for"),
        ({"call_timeout": "1"}, TypeError, "call_timeout must be a number"),
    ],
)
def test_breaker_arguments_are_checked(kwargs: dict, error: type, words: str) -> None:
    with pytest.raises(error, match=words):
        CircuitBreaker(**kwargs)


def test_bucket_allows_burst_then_rate() -> None:
    clock = Clock()
    limiter = RateLimiter(rate_per_s=4, burst=3, clock=clock)  # binary-exact steps below
    assert [limiter.try_acquire() for _ in range(4)] == [True, True, True, False]
    assert limiter.retry_after() == 0.25
    clock.now += 0.125
    assert not limiter.try_acquire()
    clock.now += 0.125
    assert limiter.try_acquire()
    clock.now += 100.0  # refills up to burst, no further
    assert sum(limiter.try_acquire() for _ in range(10)) == 3
    assert limiter.denied == 9


def test_bucket_bounds_calls_over_a_long_outage() -> None:
    clock = Clock()
    limiter = RateLimiter(rate_per_s=5, burst=2, clock=clock)
    allowed = 0
    for _ in range(10_000):  # 10,000 requests over 10 s
        clock.now += 0.001
        allowed += limiter.try_acquire()
    assert allowed <= 2 + 5 * 10
    assert allowed >= 5 * 10 - 1


def test_bucket_survives_a_clock_stepping_back() -> None:
    clock = Clock()
    limiter = RateLimiter(rate_per_s=1, burst=1, clock=clock)
    assert limiter.try_acquire()
    clock.now -= 50
    assert not limiter.try_acquire()
    clock.now += 1
    assert limiter.try_acquire()


def test_bucket_is_thread_safe() -> None:
    limiter = RateLimiter(rate_per_s=1e-6, burst=100)
    taken = []

    def take() -> None:
        taken.append(sum(limiter.try_acquire() for _ in range(1000)))

    threads = [threading.Thread(target=take) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(taken) == 100


def test_bucket_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="rate_per_s must be a finite number > 0"):
        RateLimiter(0)
    with pytest.raises(ValueError, match="burst must be >= 1"):
        RateLimiter(1, burst=0)
    with pytest.raises(ValueError, match="burst 2"):
        RateLimiter(1, burst=2).try_acquire(3)


def test_transitions_record_each_state_change_with_its_time() -> None:
    clock = Clock()
    breaker = CircuitBreaker(failure_threshold=1, open_for=1.0, clock=clock)
    breaker.success()  # closed already: not a change
    clock.now = 10.0
    breaker.failure()
    clock.now = 11.5
    assert breaker.allow()  # half-open, noticed now
    clock.now = 11.6
    breaker.success()
    assert list(breaker.transitions) == [(10.0, "open"), (11.5, "half-open"), (11.6, "closed")]
