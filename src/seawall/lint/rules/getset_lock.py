"""SW004: the GETSET lock recipe."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from seawall.lint._context import FileContext, RedisCall
from seawall.lint._model import rule

# A value that is a point in time: the recipe stores "now + timeout" in the lock key.
_CLOCKS = frozenset({"time", "time_ns", "monotonic", "now", "utcnow", "timestamp"})
_DEADLINE_WORDS = re.compile(r"expir|deadline|timeout|until", re.IGNORECASE)


def _value(call: RedisCall) -> ast.expr | None:
    if len(call.args) > 1:
        return call.args[1]
    return call.keyword("value")


def _clock_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name in _CLOCKS


def _is_a_deadline(value: ast.expr | None) -> bool:
    """`time.time() + 10`, `expires`, `self.deadline`: a point in the future, the lock
    recipe's value. The bare current time (`getset("last_run", time.time())`, swapping in
    a timestamp to learn the previous one) is not."""
    if value is None:
        return False
    for node in ast.walk(value):
        added = isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add)
        if added and any(_clock_call(n) for n in ast.walk(node)):
            return True
        if isinstance(node, ast.Name) and _DEADLINE_WORDS.search(node.id):
            return True
        if isinstance(node, ast.Attribute) and _DEADLINE_WORDS.search(node.attr):
            return True
    return False


def _swaps(call: RedisCall) -> bool:
    """GETSET, or its replacement `set(k, v, get=True)`."""
    return call.command == "getset" or (call.command == "set" and call.has_keyword("get"))


@rule("SW004", "getset-lock")
def check(ctx: FileContext) -> Iterator[tuple[ast.AST, str]]:
    """The lock recipe of seed 000 stores "now + timeout" in the lock key with SETNX; a
    client that finds the stored time past breaks the lock with GETSET and owns it if the
    old value it got back was still expired. It trusts every client's clock (a skewed
    clock steals live locks), a client that loses the race has still overwritten the
    winner's expiry, the key has no TTL so a crashed holder is only noticed by polling,
    and the release (a DEL) cannot tell whose lock it removes.

    Fix: `r.set(key, token, nx=True, px=ttl_ms)` to take the lock, Redis' own expiry for a
    crashed holder, and a release that compares the token and deletes in one Lua script;
    `seawall.Lock` does all three. Reported at a GETSET (or `set(..., get=True)`) on a key
    the file also sets with SETNX/`nx=True`, or whose new value is a deadline (now + a
    timeout, or a name saying expires/deadline/timeout/until).
    """
    taken = ctx.by_key(
        c for c in ctx.calls if c.command == "setnx" or (c.command == "set" and c.has_keyword("nx"))
    )
    for call in ctx.calls:
        if not _swaps(call):
            continue
        if ctx.with_key(taken, call) or _is_a_deadline(_value(call)):
            yield (
                call.node,
                (
                    "the GETSET lock recipe trusts client clocks and overwrites the winner's "
                    "expiry; take the lock with set(key, token, nx=True, px=ttl) and release it "
                    "by token in one Lua script (or use seawall.Lock)"
                ),
            )
