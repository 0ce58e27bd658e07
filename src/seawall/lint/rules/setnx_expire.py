"""SW003: the SETNX-then-EXPIRE lock recipe."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from seawall.lint._bindings import Kind
from seawall.lint._context import FileContext, RedisCall
from seawall.lint._model import rule

EXPIRY_OPTIONS = ("ex", "px", "exat", "pxat", "keepttl")
EXPIRE_COMMANDS = ("expire", "pexpire", "expireat", "pexpireat")


def sets_if_absent_without_expiry(call: RedisCall) -> bool:
    """`setnx(k, v)`, or `set(k, v, nx=True)` with no ex/px/exat/pxat."""
    if call.command == "setnx":
        return True
    if call.command != "set":
        return False
    if call.raw:
        words = {
            a.value.lower()
            for a in call.args
            if isinstance(a, ast.Constant) and isinstance(a.value, str)
        }
        return "nx" in words and not words & set(EXPIRY_OPTIONS)
    return call.has_keyword("nx") and not any(call.has_keyword(o) for o in EXPIRY_OPTIONS)


@rule("SW003", "setnx-then-expire")
def check(ctx: FileContext) -> Iterator[tuple[ast.AST, str]]:
    """The lock recipe of seed 003 (`if setnx(key, now): expire(key, secs)`) takes a lock
    with two commands. A process that dies, is killed or loses its connection between
    them leaves a key that never expires: the lock is held forever and every other
    process waits on it. (The seed's own repair, "if TTL < 0, take the lock", lets two
    processes both decide the lock is theirs.) Redis 2.6.12 made this one command.

    Fix: `r.set(key, token, nx=True, px=ttl_ms)`: the key and its expiry are set together
    or not at all; or use `seawall.Lock`, which also releases by token and renews the lease.
    Reported at the SETNX (or `set(..., nx=True)` without an expiry) whose key the same
    function then passes to EXPIRE/PEXPIRE/EXPIREAT/PEXPIREAT. Queued together on one
    pipeline (even a MULTI/EXEC one) the pair cannot be split by a crash, but it is still
    wrong: EXPIRE runs even when SETNX failed, and extends the lease of the lock another
    client holds, so a holder that died keeps blocking everyone as long as others retry.
    """
    expires = ctx.by_key(ctx.commands(*EXPIRE_COMMANDS))
    for call in ctx.calls:
        if not sets_if_absent_without_expiry(call):
            continue
        scope = ctx.scope_of(call.node)
        text = ctx.key_text(call)
        later = [
            e
            for e in (expires.get(text, []) if text is not None else [])
            if ctx.scope_of(e.node) is scope and e.node.lineno >= call.node.lineno
        ]
        if later and call.receiver is Kind.PIPELINE and later[0].receiver is Kind.PIPELINE:
            # Queued on one pipeline (MULTI/EXEC or not): no crash falls between the two,
            # but EXPIRE runs whatever SETNX answered.
            yield (
                call.node,
                (
                    f"SETNX and {later[0].name} (line {later[0].node.lineno}) queued on one "
                    "pipeline: the expiry is set even when SETNX failed, so it extends the "
                    "lock another client holds; use set(key, token, nx=True, px=ttl) in one "
                    "command (or seawall.Lock)"
                ),
            )
        elif later:
            yield (
                call.node,
                (
                    f"SETNX then {later[0].name} (line {later[0].node.lineno}) is two "
                    "commands: a crash between them leaves a lock that never expires; use "
                    "set(key, token, nx=True, px=ttl) in one command (or seawall.Lock)"
                ),
            )
