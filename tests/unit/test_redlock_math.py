"""Redlock arithmetic without a server: quorum, drift, validity, retry delays, fences."""

from __future__ import annotations

import random

import pytest

from seawall.locks import _redlock


@pytest.mark.parametrize(("masters", "needed"), [(1, 1), (2, 2), (3, 2), (4, 3), (5, 3), (7, 4)])
def test_quorum_is_a_strict_majority(masters: int, needed: int) -> None:
    assert _redlock.quorum(masters) == needed
    assert 2 * _redlock.quorum(masters) > masters  # any two majorities share a master


def test_drift_is_one_percent_plus_two_ms() -> None:
    assert _redlock.drift(10.0) == pytest.approx(0.102)
    assert _redlock.drift(0.1) == pytest.approx(0.003)


def test_validity_counts_from_the_send_and_subtracts_drift() -> None:
    assert _redlock.validity(10.0, started=100.0, now=100.5) == pytest.approx(10 - 0.5 - 0.102)
    assert _redlock.deadline(10.0, started=100.0) == pytest.approx(100 + 10 - 0.102)
    # A reply that took the whole ttl leaves no validity, and neither does the drift alone.
    assert _redlock.validity(1.0, started=0.0, now=1.0) < 0
    assert _redlock.validity(1.0, started=0.0, now=1.0 - _redlock.drift(1.0)) == pytest.approx(0)


@pytest.mark.parametrize(
    ("granted", "masters", "validity", "success"),
    [
        (3, 5, 0.1, True),
        (2, 5, 5.0, False),
        (5, 5, 0.0, False),
        (5, 5, -1.0, False),
        (2, 3, 0.001, True),
        (1, 1, 1.0, True),
        (2, 4, 9.0, False),
    ],
)
def test_tally_needs_majority_and_positive_validity(
    granted: int, masters: int, validity: float, success: bool
) -> None:
    assert _redlock.Tally(granted, masters, validity).success is success


def test_default_node_timeout_is_small_against_the_ttl() -> None:
    assert _redlock.default_node_timeout(10.0) == pytest.approx(0.1)
    assert _redlock.default_node_timeout(1.0) == pytest.approx(0.05)
    assert _redlock.default_node_timeout(300.0) == pytest.approx(0.5)
    assert _redlock.default_node_timeout(0.1) == pytest.approx(0.01)
    for ttl in (0.01, 0.3, 2.0, 60.0, 1e6):
        assert _redlock.default_node_timeout(ttl) <= ttl / 10


def test_retry_delay_is_random_within_bounds() -> None:
    rng = random.Random(7)
    delays = [_redlock.retry_delay(0.2, rng) for _ in range(2000)]
    assert min(delays) >= 0.02 and max(delays) <= 0.2
    assert len({round(d, 4) for d in delays}) > 1000  # spread, so split voters desynchronize
    assert max(delays) - min(delays) > 0.15


def test_fence_is_the_highest_granted_counter() -> None:
    plan = _redlock.plan_fence([4, None, 4, 4, None], 5)
    assert (plan.fence, plan.at_fence, plan.to_raise) == (4, 3, ())


def test_lagging_granters_are_raised_when_too_few_are_at_the_fence() -> None:
    # Master 2 saw more failed attempts: its counter runs ahead of the others'.
    plan = _redlock.plan_fence([3, 3, 9, None, None], 5)
    assert (plan.fence, plan.at_fence, plan.to_raise) == (9, 1, (0, 1))
    # Without raising them, a later majority {0, 1, 3} could number its hold 4 < 9.


def test_fence_of_nothing_granted() -> None:
    plan = _redlock.plan_fence([None, None, None], 3)
    assert (plan.fence, plan.at_fence, plan.to_raise) == (0, 0, ())


@pytest.mark.parametrize(
    ("masters", "warns"),
    [(1, True), (2, True), (3, False), (4, True), (5, False), (6, True), (7, False)],
)
def test_master_count_warning(masters: int, warns: bool) -> None:
    assert (_redlock.master_count_warning(masters) is not None) is warns


def test_master_identity_ignores_database_and_spelling_of_localhost() -> None:
    a = _redlock.master_identity({"host": "localhost", "port": 7000, "db": 0})
    b = _redlock.master_identity({"host": "127.0.0.1", "port": 7000, "db": 3})
    c = _redlock.master_identity({"host": "127.0.0.1", "port": 7001})
    assert a == b != c
    assert _redlock.master_identity({"path": "/tmp/r.sock"}) == ("unix", "/tmp/r.sock")
    assert _redlock.master_identity({"service_name": "mymaster"}) is None
