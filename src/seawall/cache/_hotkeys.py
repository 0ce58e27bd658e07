"""Which keys a process reads most: a bounded frequent-items sketch, cheap per read.

Each read adds one to its key's count in a plain dict. When the dict holds more than
`8 * capacity` keys it is pruned to the `capacity` heaviest, and every survivor loses the
heaviest pruned count: the Misra-Gries "Frequent" algorithm done in batches. Memory stays
bounded, a count never exceeds the key's true reads and undercounts by at most
reads / capacity, so any key read more often than that share is kept (no false
negatives among the really hot). Counts are halved every `half_life` seconds so the sketch
follows what is hot now, not what was hot an hour ago.

Only one read in `sample_every` is counted (a countdown with random gaps): a hot key is
read often enough to stand out among the samples, and the cost per read stays a few
percent of an in-process cache hit (pruning, a partial sort, dominates the cost of the
reads that are counted). Counts and `reads` are in samples. No lock: under the GIL a lost
increment between two threads only undercounts, which a sketch tolerates.
"""

from __future__ import annotations

import heapq
import random
import time
from collections.abc import Callable

# A key is hot once this many of its reads were sampled recently (a few per half-life).
HOT_MIN_SAMPLES = 2


class HotKeys:
    __slots__ = (
        "_clock",
        "_counts",
        "_decay_at",
        "_decayed_at",
        "_gap_bits",
        "_limit",
        "_mean_gap",
        "_window",
        "capacity",
        "half_life",
        "reads",
        "sample_every",
        "skip",
    )

    def __init__(
        self,
        capacity: int = 256,
        *,
        sample_every: int = 1,
        half_life: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"hot key capacity must be an int >= 1, got {capacity!r}")
        if not half_life > 0:
            raise ValueError(f"hot key half_life must be > 0 seconds, got {half_life!r}")
        if isinstance(sample_every, bool) or not isinstance(sample_every, int) or sample_every < 1:
            raise ValueError(f"hot key sample_every must be an int >= 1, got {sample_every!r}")
        self.capacity = capacity
        self.sample_every = sample_every
        self.skip = sample_every  # reads until the next sample
        # Gaps are 1 + a random number of `_gap_bits` bits: a mean of about sample_every
        # (exactly 1 when every read is sampled; 4.5 for 4, 8.5 for 8).
        self._gap_bits = 0 if sample_every == 1 else (2 * sample_every).bit_length() - 1
        self._mean_gap = 1 + ((1 << self._gap_bits) - 1) / 2  # reads per sample, on average
        self.half_life = half_life
        self._clock = clock
        self._counts: dict[str, int] = {}
        # Pruning costs O(limit) and frees limit - capacity places: a wide margin makes it
        # rare (amortised over ~7 x capacity new keys).
        self._limit = 8 * capacity
        self._decayed_at = clock()  # the last halving (or the start)
        self._decay_at = self._decayed_at + half_life
        # The seconds of reads the counts stand for at the last halving, each second
        # weighted by the halvings since: 0 at the start, half_life once steady.
        self._window = 0.0
        self.reads = 0  # since the last decay, halved with the counts

    def offer(self, key: str) -> bool:
        """Count one read of `key` (one in `sample_every`). True when the counts were just
        halved (once per `half_life`): the moment to publish `top()`.

        A hot read path may inline the countdown instead (`skip -= 1`, and `sample(key)`
        once it reaches 0): it saves the call on the reads that are not sampled."""
        self.skip -= 1
        return self.skip <= 0 and self.sample(key)

    def sample(self, key: str) -> bool:
        """Count `key` as sampled and start the next gap; True as `offer` says."""
        # The next gap is random (mean sample_every): a fixed stride would alias with a
        # round-robin read pattern and never sample some keys at all.
        self.skip = 1 + random.getrandbits(self._gap_bits)
        counts = self._counts
        counts[key] = counts.get(key, 0) + 1
        if len(counts) > self._limit:
            self._prune()
        # The clock is read on every sample (one read in sample_every; ~50 ns): read only
        # every 64th, it took about a thousand reads of a key before the first halving,
        # so a process reading a key 30 times a second published nothing for 25 s.
        return self._clock() >= self._decay_at and self.decay()

    def is_hot(self, key: str) -> bool:
        """Whether `key` is among the heavy keys: at least HOT_MIN_SAMPLES recent samples."""
        return self._counts.get(key, 0) >= HOT_MIN_SAMPLES

    def rate(self, count: int) -> float:
        """Reads per second that a (decayed) sample count stands for: the count over the
        seconds it covers, each weighted as its samples were by the halvings since (the
        window kept at each halving, plus the time since), so the rate is right at any
        phase of the half-life and from the first second; each sample stands for the
        mean gap of reads."""
        window = self._window + max(0.0, self._clock() - self._decayed_at)
        return count * self._mean_gap / window if window > 0 else 0.0

    def _prune(self) -> None:
        counts = self._counts
        # The (capacity+1)-th heaviest count: every key at or below it goes, and every
        # survivor gives up as much (Misra-Gries), so a count stays a lower bound.
        floor = heapq.nlargest(self.capacity + 1, counts.values())[-1]
        self.reads += sum(counts.values())
        self._counts = {key: count - floor for key, count in counts.items() if count > floor}

    def decay(self) -> bool:
        """Halve every count once `half_life` has passed since the last halving."""
        now = self._clock()
        if now < self._decay_at:
            return False
        self._window = (self._window + (now - self._decayed_at)) / 2
        self._decayed_at = now
        self._decay_at = now + self.half_life
        self.reads = (self.reads + sum(self._counts.values())) // 2
        self._counts = {k: c // 2 for k, c in self._counts.items() if c >= 2}
        return True

    def count(self, key: str) -> int:
        """A lower bound of `key`'s recent reads (decayed)."""
        return self._counts.get(key, 0)

    def top(self, n: int) -> list[tuple[str, int]]:
        """The `n` heaviest keys with their counts, heaviest first."""
        return heapq.nlargest(n, self._counts.items(), key=lambda item: item[1])

    def __len__(self) -> int:
        return len(self._counts)
