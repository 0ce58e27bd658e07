"""Lua scripts: each family's `*.lua` files, loaded once, run by the EVALSHA helper in
`seawall.shared._async.scripts` (and its generated sync twin)."""

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
    # The family package whose folder holds the script (and its prelude), e.g. "seawall.locks".
    package: str = "seawall"


def reply_text(value: Any) -> str:
    """A reply or pub/sub field as str, whether or not the client decodes responses."""
    return value.decode() if isinstance(value, bytes) else str(value)


@functools.cache
def load(package: str, name: str) -> LuaScript:
    """The script `<name>.lua` in the folder of `package` (a family: "seawall.cache").
    Caching the text is safe: it never changes."""
    source = resources.files(package).joinpath(f"{name}.lua").read_text("utf-8")
    return LuaScript(name, source, hashlib.sha1(source.encode()).hexdigest(), package)


@functools.cache
def with_prelude(prelude_name: str, script: LuaScript) -> LuaScript:
    """`script` run after `<prelude_name>.lua` of the same family, as one script: the
    prelude may return early, take its own KEYS and ARGV off the ends and fall through, or
    define functions that scripts share."""
    prelude = load(script.package, prelude_name)
    source = f"{prelude.source}\n{script.source}"
    name = f"{script.name}+{prelude.name}"
    return LuaScript(name, source, hashlib.sha1(source.encode()).hexdigest(), script.package)
