"""What every demo scenario is given: the server, a client, the worker processes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import redis

from seawall.demo._workers import WorkerPool


@dataclass
class DemoContext:
    url: str
    client: redis.Redis
    workers: WorkerPool
    quick: bool
    run_id: str
    progress: Callable[[str], None]

    def name(self, base: str) -> str:
        """A name (key or lock) private to this demo run."""
        return f"demo:{self.run_id}:{base}"
