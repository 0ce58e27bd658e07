from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from redis.client import Pipeline
    from worker import Queue

WORKERS = "workers"


def clean_registry(queue: Queue, keys: list[str]) -> None:
    """Drop the names of workers whose keys are gone: one pipeline, whatever the count."""
    with queue.connection.pipeline() as pipeline:
        for key in keys:
            pipeline.exists(key)
        gone = [key for key, alive in zip(keys, pipeline.execute(), strict=True) if not alive]
        for key in gone:
            pipeline.srem(WORKERS, key)
        pipeline.execute()


def forget(name: str, pipeline: Pipeline) -> None:
    pipeline.srem(WORKERS, name)
