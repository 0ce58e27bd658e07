"""Cache keys for decorated functions: one key per distinct call, the same key for the
same call however it is spelled.

- Arguments are bound to the signature with defaults applied, so `profile(3)`,
  `profile(uid=3)` and `profile(3, full=False)` (the default) are one key.
- `self` / `cls` of a method are left out (a method's result is per argument, not per
  short-lived object whose address is reused); name them in a `key=` template to key by
  them (`key="user:{self.id}:{day}"`).
- Values keep their types apart (`f((1, 2))` and `f([1, 2])`, `f(1)` and `f("1")` and
  `f(1.0)` differ) in a canonical text: dict order and set order do not matter.
- An object whose only text form is `object.__repr__` (a memory address: the same for
  two objects in turn, different for equal ones) is refused with a message showing how
  to pass `key=`; objects with their own `__repr__` (dataclasses, enums, ...) are keyed by it.
- Keys longer than KEY_LIMIT characters keep their function prefix and hash the rest.
"""

from __future__ import annotations

import datetime
import decimal
import enum
import hashlib
import inspect
import json
import string
import uuid
from collections.abc import Callable, Mapping
from typing import Any

# Longer argument texts are replaced by a hash: a big argument must not make a huge key.
KEY_LIMIT = 200

_SKIPPED_FIRST = ("self", "cls")


class CallKeys:
    """Builds the cache key of each call of one function."""

    def __init__(self, function: Callable[..., Any], key: str | Callable[..., Any] | None) -> None:
        self.function = function
        self.prefix = f"{function.__module__}.{function.__qualname__}"
        self.signature = inspect.signature(function)
        self._key = key
        parameters = list(self.signature.parameters)
        template_fields = _template_fields(key) if isinstance(key, str) else set()
        # Only the default key leaves out self/cls; a template may name them.
        first = parameters[0] if parameters else None
        self._skip = first if first in _SKIPPED_FIRST else None
        unknown = template_fields - set(parameters)
        if unknown:
            raise ValueError(
                f"key template {key!r} of {self.prefix} names {sorted(unknown)}, which are not "
                f"parameters of the function ({', '.join(parameters) or 'none'})"
            )

    def __call__(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str:
        key = self._key
        if callable(key):
            return key(*args, **kwargs)  # type: ignore[no-any-return]
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{self.prefix}: {exc}") from None
        bound.apply_defaults()
        arguments = bound.arguments
        if isinstance(key, str):
            return key.format(**arguments)
        shown = [
            (name, canonical(value, name, self.prefix))
            for name, value in arguments.items()
            if name != self._skip
        ]
        text = ",".join(f"{name}={value}" for name, value in shown)
        if len(text) > KEY_LIMIT:
            text = "#" + hashlib.sha256(text.encode()).hexdigest()[:32]
        return f"{self.prefix}({text})"


def _template_fields(template: str) -> set[str]:
    """The parameter names a "user:{user_id}" or "{self.id}" template uses."""
    fields = set()
    for _, field, _, _ in string.Formatter().parse(template):
        if field:
            fields.add(field.split(".", 1)[0].split("[", 1)[0])
    return fields


def canonical(value: Any, name: str = "", where: str = "") -> str:
    """A text that is equal for equal values of one type, and differs across types."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, enum.Enum):
        return f"{type(value).__qualname__}.{value.name}"
    if isinstance(value, int):
        return f"i{value}"
    if isinstance(value, float):
        return f"f{value!r}"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, bytes):
        return f"b{value.hex()}"
    if isinstance(value, decimal.Decimal):
        return f"d{value}"
    if isinstance(value, uuid.UUID):
        return f"u{value}"
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return f"{type(value).__name__[0]}{value.isoformat()}"
    if isinstance(value, tuple):
        return "(" + ",".join(canonical(item, name, where) for item in value) + ")"
    if isinstance(value, list):
        return "[" + ",".join(canonical(item, name, where) for item in value) + "]"
    if isinstance(value, set | frozenset):
        return "{" + ",".join(sorted(canonical(item, name, where) for item in value)) + "}"
    if isinstance(value, Mapping):
        items = sorted(
            f"{canonical(k, name, where)}:{canonical(v, name, where)}" for k, v in value.items()
        )
        return "{" + ",".join(items) + "}" if items else "{:}"
    if type(value).__repr__ is object.__repr__:  # type: ignore[comparison-overlap]
        raise TypeError(
            f"{where}: argument {name!r} is a {type(value).__qualname__} whose only text form is "
            "its memory address, which cannot key a cache (equal objects would differ, a "
            "later object at the same address would share the entry); key the call "
            f'yourself, e.g. key="{{{name}.id}}" or key=lambda *a, **kw: ...'
        )
    return f"{type(value).__module__}.{type(value).__qualname__}:{value!r}"
