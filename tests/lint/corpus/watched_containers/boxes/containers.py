"""A list and a counter set whose writes run as one MULTI/EXEC under WATCH."""

from __future__ import annotations

from typing import cast

from redis.client import Pipeline

from .base import Container


class ListBox(Container):
    def replace(self, start: int, values: list[str]) -> None:
        with self._watch() as pipeline:
            length = cast(int, pipeline.llen(self.key))  # read at once, under WATCH
            if start >= length:
                raise IndexError(start)
            pipeline.multi()  # from here on the commands are queued until EXEC
            for offset, value in enumerate(values):
                pipeline.lset(self.key, start + offset, value)

    def _append(self, pipeline: Pipeline, values: list[str]) -> None:
        pipeline.multi()
        pipeline.rpush(self.key, *values)

    def heads(self, keys: list[str]) -> list[bytes]:
        with self._watch() as pipeline:
            # Still under WATCH, before MULTI: each LINDEX waits for its reply.
            found = [pipeline.lindex(key, 0) for key in keys]
            pipeline.multi()
            pipeline.delete(*keys)
        return found

    def counts(self, members: list[str]) -> None:
        with self._watch() as pipeline:
            pipeline.multi()
            for member in members:
                pipeline.hincrby(self.key, member, 1)
            pipeline.execute()
            for member in members:
                pipeline.hget(self.key, member)  # after EXEC: one round trip each
