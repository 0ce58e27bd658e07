"""The hot-key sketch: bounded memory, no hot key missed, counts that follow the present."""

from __future__ import annotations

import random

import pytest

from seawall.cache._hotkeys import HotKeys


def zipf_reads(n_keys: int, s: float, reads: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    weights = [1 / (rank**s) for rank in range(1, n_keys + 1)]
    return [f"k{rank}" for rank in rng.choices(range(1, n_keys + 1), weights, k=reads)]


def test_top_20_of_a_zipf_load_are_found() -> None:
    sketch = HotKeys(256)
    reads = zipf_reads(100_000, 1.1, 200_000)
    for key in reads:
        sketch.offer(key)
    assert len(sketch) <= 8 * 256
    truth = {f"k{rank}" for rank in range(1, 21)}
    found = {key for key, _ in sketch.top(20)}
    recall = len(found & truth) / 20
    assert recall >= 0.95, sorted(found - truth)


def test_one_read_in_sample_every_is_counted() -> None:
    sketch = HotKeys(16, sample_every=4)
    for _ in range(4000):
        sketch.offer("a")
    assert 800 <= sketch.count("a") <= 1200


def test_round_robin_reads_sample_every_key() -> None:
    sketch = HotKeys(16, sample_every=4)
    for _ in range(100):
        for key in "abcdefghij":
            sketch.offer(key)
    assert all(sketch.is_hot(key) for key in "abcdefghij")


def test_sampled_top_20_of_a_zipf_load_are_found() -> None:
    sketch = HotKeys(256, sample_every=4)
    for key in zipf_reads(100_000, 1.1, 560_000):  # 2 s of L1 hits in one process
        sketch.offer(key)
    found = {key for key, _ in sketch.top(20)}
    assert len(found & {f"k{rank}" for rank in range(1, 21)}) >= 19


def test_counts_are_lower_bounds_within_reads_over_capacity() -> None:
    sketch = HotKeys(8)
    reads = [f"cold{i}" for i in range(1000)] + ["hot"] * 300
    random.Random(1).shuffle(reads)
    for key in reads:
        sketch.offer(key)
    assert 300 - len(reads) // 8 <= sketch.count("hot") <= 300
    assert sketch.top(1)[0][0] == "hot"


def test_counts_halve_every_half_life() -> None:
    now = [0.0]
    sketch = HotKeys(16, half_life=10.0, clock=lambda: now[0])
    for _ in range(100):
        sketch.offer("a")
    sketch.offer("b")
    assert not sketch.decay()
    now[0] = 10.0
    assert sketch.decay()
    assert sketch.count("a") == 50
    assert sketch.count("b") == 0 and len(sketch) == 1  # a count of 1 halves to nothing


@pytest.mark.parametrize("capacity", [0, -1, True, 1.5])
def test_bad_capacity_is_refused(capacity: object) -> None:
    with pytest.raises(ValueError, match="capacity"):
        HotKeys(capacity)  # type: ignore[arg-type]


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_key_read_30_times_a_second_is_published_on_time_at_its_rate() -> None:
    """One key, 30 reads a second for 25 s, one read in 16 sampled (the Cache's setting):
    the first publishing moment comes one half-life in (it took ~1,000 reads, 33 s, when
    the clock was read every 64th sample), and the rate reported is right on average at
    any moment (it read 51 when counts were never halved); with ~20 samples behind a
    figure, one figure alone is within 35 %."""
    rates = []
    for seed in range(20):
        random.seed(seed)
        clock = _Clock()
        sketch = HotKeys(256, sample_every=16, half_life=10.0, clock=clock)
        published = []
        for read in range(750):
            clock.now = read / 30
            if sketch.offer("menu"):
                published.append(clock.now)
            if clock.now >= 10 and read % 15 == 0:  # from the first publishing on
                rate = sketch.rate(sketch.count("menu"))
                assert 19.5 <= rate <= 40.5, (seed, clock.now, sketch.count("menu"))
                rates.append(rate)
        assert published and 10.0 <= published[0] <= 11.0, published
        assert len(published) == 2, published  # every half-life: at 10 s and 20 s
    mean = sum(rates) / len(rates)
    assert 27 <= mean <= 33, mean
