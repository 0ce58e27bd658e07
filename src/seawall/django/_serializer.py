"""How values become bytes in Redis. No I/O.

By default exactly as Django's own RedisCache writes them: an int (not a bool, not a
subclass) as its decimal digits, so INCRBY works on it, anything else pickled with the
highest protocol. The two backends then read each other's entries, and a project can
switch between them without emptying its cache.

pickle runs code chosen by whoever wrote the bytes: it is Django's choice for its cache
(and so the default here, for compatibility), safe only while every writer to the Redis
server is trusted. OPTIONS["serializer"] = "json" stores JSON instead (ints stay digits).
"""

from __future__ import annotations

import json
import pickle
from typing import Any

from django.utils.module_loading import import_string


class DjangoSerializer:
    """Django's RedisCache format: ints as digits, everything else pickled."""

    def __init__(self, protocol: int | None = None) -> None:
        self.protocol = pickle.HIGHEST_PROTOCOL if protocol is None else protocol

    def dumps(self, value: Any) -> bytes | int:
        if type(value) is int:
            return value
        return pickle.dumps(value, self.protocol)

    def loads(self, data: bytes) -> Any:
        try:
            return int(data)
        except ValueError:
            return pickle.loads(data)


class JsonSerializer:
    """Plain JSON (ints as digits, so incr() works); no code runs on reading."""

    def dumps(self, value: Any) -> bytes | int:
        if type(value) is int:
            return value
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()

    def loads(self, data: bytes) -> Any:
        return json.loads(data)


def make_serializer(choice: Any) -> Any:
    """OPTIONS["serializer"]: None or "pickle" (Django's format), "json", a dotted path to
    a class, a class, or an object with dumps() and loads()."""
    if choice is None or choice == "pickle":
        return DjangoSerializer()
    if choice == "json":
        return JsonSerializer()
    if isinstance(choice, str):
        choice = import_string(choice)
    if isinstance(choice, type):
        choice = choice()
    if not (callable(getattr(choice, "dumps", None)) and callable(getattr(choice, "loads", None))):
        raise TypeError(
            f"OPTIONS['serializer'] must be 'pickle', 'json', a dotted path to a class, or an "
            f"object with dumps(value) and loads(bytes); got {choice!r}"
        )
    return choice
