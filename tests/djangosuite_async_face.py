"""seawall.django.RedisCache with every sync method answered by its a* twin, so Django's
(sync) cache tests exercise the asyncio face: each call runs on an event loop of its own
through asgiref's async_to_sync, with that loop's redis.asyncio client. Only the methods
the backend implements natively are faced: Django's own incr_version() goes through the
faced get/set/delete (and its aincr_version() would call a faced incr_version back)."""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync

from seawall.django import RedisCache

FACED = [
    "add",
    "get",
    "set",
    "touch",
    "delete",
    "get_many",
    "has_key",
    "incr",
    "decr",
    "set_many",
    "delete_many",
    "clear",
    "get_or_set",
]


def _faced(name: str) -> Any:
    def call(self: RedisCache, *args: Any, **kwargs: Any) -> Any:
        return async_to_sync(getattr(self, "a" + name))(*args, **kwargs)

    call.__name__ = name
    return call


class AsyncFacedRedisCache(RedisCache):
    pass


for _name in FACED:
    setattr(AsyncFacedRedisCache, _name, _faced(_name))
