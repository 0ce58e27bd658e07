"""Lua scripts: loaded from seawall/lua/*.lua once, run by the EVALSHA helpers in _async/_sync."""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from importlib import resources
from typing import Any


@dataclass(frozen=True, slots=True)
class LuaScript:
    name: str
    source: str
    sha: str


def reply_text(value: Any) -> str:
    """A reply or pub/sub field as str, whether or not the client decodes responses."""
    return value.decode() if isinstance(value, bytes) else str(value)


@functools.cache
def load(name: str) -> LuaScript:
    """The script `seawall/lua/<name>.lua`. Caching the text is safe: it never changes."""
    source = resources.files("seawall").joinpath("lua", f"{name}.lua").read_text("utf-8")
    return LuaScript(name, source, hashlib.sha1(source.encode()).hexdigest())


@functools.cache
def with_prelude(prelude_name: str, script: LuaScript) -> LuaScript:
    """`script` run after `seawall/lua/<prelude_name>.lua`, as one script: the prelude
    may return early, take its own KEYS and ARGV off the ends and fall through, or define
    functions that scripts share."""
    prelude = load(prelude_name)
    source = f"{prelude.source}\n{script.source}"
    name = f"{script.name}+{prelude.name}"
    return LuaScript(name, source, hashlib.sha1(source.encode()).hexdigest())
