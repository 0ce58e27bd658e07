"""Which keys a process reads most: a bounded frequent-items sketch, cheap per read.

Each read adds one to its key's count in a plain dict. When the dict holds more than
`2 * capacity` keys it is pruned to the `capacity` heaviest, and every survivor loses the
heaviest pruned count: the Misra-Gries "Frequent" algorithm done in batches. Memory stays
bounded, a count never exceeds the key's true reads and undercounts by at most
reads / capacity, so any key read more often than that share is kept (no false
negatives among the really hot). Counts are halved every `half_life` seconds so the sketch
follows what is hot now, not what was hot an hour ago.

Only one read in `sample_every` is counted (a countdown, no random draw): a hot key is
read often enough to stand out among the samples, and the cost per read stays a few
percent of an in-process cache hit (pruning, a partial sort, dominates the cost of the
reads that are counted). Counts and `reads` are in samples. No lock: under the GIL a lost
increment between two threads only undercounts, which a sketch tolerates.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable


class HotKeys:
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
        self._skip = sample_every
        self.half_life = half_life
        self._clock = clock
        self._counts: dict[str, int] = {}
        self._limit = 2 * capacity
        self._decay_at = clock() + half_life
        self.reads = 0  # since the last decay, halved with the counts

    def offer(self, key: str) -> None:
        """Count one read of `key` (one in `sample_every`)."""
        self._skip -= 1
        if self._skip > 0:
            return
        self._skip = self.sample_every
        counts = self._counts
        counts[key] = counts.get(key, 0) + 1
        if len(counts) > self._limit:
            self._prune()

    def _prune(self) -> None:
        counts = self._counts
        kept = heapq.nlargest(self.capacity + 1, counts.items(), key=lambda item: item[1])
        floor = kept[-1][1]  # the heaviest count pruned (or tied with it)
        self.reads += sum(counts.values())
        self._counts = {key: count - floor for key, count in kept[:-1] if count > floor}

    def decay(self) -> bool:
        """Halve every count once `half_life` has passed since the last halving."""
        now = self._clock()
        if now < self._decay_at:
            return False
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
