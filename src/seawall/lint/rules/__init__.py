"""The rules of `seawall lint`, one module each (ruff's model): a code, a message that says
what to do instead, and a docstring with the rationale and the guideline it comes from."""

from __future__ import annotations

from seawall.lint._model import Rule
from seawall.lint.rules import (
    client_per_call,
    del_release,
    flush,
    getset_lock,
    keys,
    lock_expiry,
    loop_commands,
    lua_keys,
    setnx_expire,
    socket_timeout,
    sync_in_async,
    unbounded_read,
)

RULES: tuple[Rule, ...] = (
    keys.check,
    flush.check,
    setnx_expire.check,
    getset_lock.check,
    del_release.check,
    loop_commands.check,
    unbounded_read.check,
    socket_timeout.check,
    lock_expiry.check,
    lua_keys.check,
    sync_in_async.check,
    client_per_call.check,
)
BY_CODE: dict[str, Rule] = {r.code: r for r in RULES}
