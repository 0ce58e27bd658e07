"""Lua scripts: loaded from seawall/lua/*.lua once, run by the EVALSHA helpers in _async/_sync."""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from importlib import resources


@dataclass(frozen=True, slots=True)
class LuaScript:
    name: str
    source: str
    sha: str


@functools.cache
def load(name: str) -> LuaScript:
    """The script `seawall/lua/<name>.lua`. Caching the text is safe: it never changes."""
    source = resources.files("seawall").joinpath("lua", f"{name}.lua").read_text("utf-8")
    return LuaScript(name, source, hashlib.sha1(source.encode()).hexdigest())
