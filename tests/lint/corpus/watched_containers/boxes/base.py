"""Containers that keep their state in one Redis key and change it under WATCH."""

from __future__ import annotations

import contextlib
from collections.abc import Generator, Iterator
from contextlib import AbstractContextManager
from typing import Any

from redis import Redis
from redis.client import Pipeline


class _Pipelined:
    redis: Redis
    key: str

    @contextlib.contextmanager
    def _watch_keys(self, *keys: str) -> Generator[Pipeline, None, None]:
        with self.redis.pipeline() as pipeline:
            pipeline.watch(*keys)
            yield pipeline
            pipeline.execute()

    def _managers(self, *others: _Pipelined) -> Iterator[AbstractContextManager[Pipeline]]:
        yield self._watch_keys(self.key, *(other.key for other in others))

    @contextlib.contextmanager
    def _watch(self, *others: Any) -> Generator[Pipeline, None, None]:
        """Yield a pipeline watching this container's key (and the others'); EXEC when
        the block ends."""
        with contextlib.ExitStack() as stack:
            pipelines = [stack.enter_context(manager) for manager in self._managers(*others)]
            yield pipelines[0]


class Container(_Pipelined):
    def __init__(self, key: str, redis: Redis | None = None) -> None:
        self.redis = redis if redis is not None else Redis(socket_timeout=5)
        self.key = key
