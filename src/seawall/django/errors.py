"""What seawall.django raises of its own."""

from __future__ import annotations

from redis.exceptions import ResponseError

from seawall.errors import CacheError


class NotAnInteger(CacheError, TypeError, ResponseError):
    """incr()/decr() of a value that is not an integer; `key` names it.

    A TypeError, as Django's other backends raise, and a redis-py ResponseError, as
    Django's RedisCache raises: code written against either catches it."""
